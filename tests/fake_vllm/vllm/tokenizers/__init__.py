"""``vllm.tokenizers`` stand-in: the tokenizer wrappers ``AsyncLLM.get_tokenizer()`` returns."""
