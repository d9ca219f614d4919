"""``vllm.tokenizers.mistral`` stand-in: vLLM 0.33's ``MistralTokenizer`` over the real ``mistral_common``.

vLLM's ``tokenizer_mode="auto"`` (its default) serves a ``mistralai/...`` model with this wrapper around
transformers' ``MistralCommonBackend``, which tokenizes through ``mistral_common``. As in vLLM: ``encode``
adds the BOS only with ``add_special_tokens=True`` and never parses control tokens out of text (``<s>[INST]``
in text becomes the pieces ``▁< s > [ INST ]``); ``apply_chat_template`` returns token ids, or with
``tokenize=False`` the decoded text that transformers calls unsafe. The tokenizer is Mistral-7B-Instruct-v0.3's
(v3, SentencePiece), which ``mistral_common`` ships.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mistral_common
from mistral_common.protocol.instruct.validator import ValidationMode
from transformers.tokenization_mistral_common import MistralCommonBackend

#: Mistral-7B-Instruct-v0.3's tokenizer, as ``mistral_common`` ships it.
V3_TOKENIZER = Path(mistral_common.__file__).parent / "data" / "mistral_instruct_tokenizer_240323.model.v3"


class MistralTokenizer:
    """The slice of vLLM's ``MistralTokenizer`` that a caller of ``get_tokenizer()`` uses."""

    IS_MISTRAL_TOKENIZER = True

    @classmethod
    def from_pretrained(cls, path_or_repo_id: str | Path, *args: Any, **kwargs: Any) -> MistralTokenizer:
        """The v3 tokenizer, whatever the repository (nothing is downloaded)."""
        return cls(MistralCommonBackend(tokenizer_path=str(V3_TOKENIZER), mode=ValidationMode.test))

    def __init__(self, tokenizer: MistralCommonBackend) -> None:
        self.transformers_tokenizer = tokenizer
        self.mistral = tokenizer.tokenizer
        self.instruct = self.mistral.instruct_tokenizer
        self.tokenizer = self.instruct.tokenizer

    @property
    def bos_token_id(self) -> int:
        return self.tokenizer.bos_id

    @property
    def eos_token_id(self) -> int:
        return self.tokenizer.eos_id

    @property
    def all_special_ids(self) -> list[int]:
        return [i for i in range(self.tokenizer.n_words) if self.tokenizer.is_special(i)]

    def encode(self, text: str, truncation: bool | None = None, max_length: int | None = None,
               add_special_tokens: bool = True) -> list[int]:
        encoded = self.tokenizer.encode(text, bos=add_special_tokens, eos=False)
        return encoded[:max_length] if truncation is not False and max_length is not None else encoded

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                            **kwargs: Any) -> str | list[int]:
        add_generation_prompt = kwargs.pop("add_generation_prompt", False)
        if add_generation_prompt and messages[-1]["role"] == "assistant":
            raise ValueError("Cannot set `add_generation_prompt` to True when the last message is from the "
                             "assistant. Consider using `continue_final_message` instead.")
        return self.transformers_tokenizer.apply_chat_template(
            conversation=messages, tools=tools, continue_final_message=kwargs.get("continue_final_message", False),
            tokenize=kwargs.get("tokenize", True), return_tensors=None, return_dict=False)

    def decode(self, ids: Sequence[int] | int, skip_special_tokens: bool = False) -> str:
        return self.transformers_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
