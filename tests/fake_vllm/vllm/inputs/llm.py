"""``vllm.inputs.llm`` stand-in (where vLLM >= 0.19 keeps the prompt forms)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class TextPrompt(TypedDict):
    """A prompt the engine tokenizes (with ``add_special_tokens=True`` unless told otherwise)."""

    prompt: str
    multi_modal_data: NotRequired[Any]


class TokensPrompt(TypedDict):
    """A prompt given as token ids, which the engine runs as they are."""

    prompt_token_ids: list[int]
    prompt: NotRequired[str]
    multi_modal_data: NotRequired[Any]
