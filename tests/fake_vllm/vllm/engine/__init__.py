"""``vllm.engine`` stand-in."""
