"""``vllm.inputs`` stand-in: the prompt forms ``generate`` takes."""

from vllm.inputs.llm import TextPrompt, TokensPrompt

__all__ = ["TextPrompt", "TokensPrompt"]
