"""``vllm.v1`` stand-in."""
