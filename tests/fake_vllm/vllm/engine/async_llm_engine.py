"""``vllm.engine.async_llm_engine`` stand-in: an async engine with a trivial deterministic model.

The tokenizer is picked as vLLM 0.33 picks it (``tokenizer_mode``): ``auto`` serves a ``mistralai/`` model
with vLLM's ``MistralTokenizer`` over the real ``mistral_common`` (vllm/tokenizers/mistral.py), any other with
a Hugging Face one that works like Llama 3.1's under transformers 5: ``encode`` adds the BOS token unless
``add_special_tokens=False``, the chat template starts with that BOS (so a rendered prompt that the engine
tokenizes again carries two, vLLM issue 9519), and ``apply_chat_template(tokenize=True)`` returns a mapping
(``return_dict=True``) unless told ``return_dict=False``.

The engine dies the way vLLM's does (``EngineDeadError`` for the requests in flight and every later one) when
a prompt says ``DIE`` or when the file ``$FAKE_VLLM_DIE_FILE`` exists (the engine that removes it dies, once);
it stops answering altogether when a prompt says ``HANG``.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncGenerator
from types import SimpleNamespace
from typing import Any, ClassVar

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.logprobs import Logprob
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.sampling_params import RequestOutputKind, SamplingParams
from vllm.v1.engine.exceptions import EngineDeadError

#: vLLM's default ``max_num_seqs`` where the engine arguments leave it unset.
DEFAULT_MAX_NUM_SEQS = 256


class _Tokenizer:
    """Words, runs of white space and special tokens are tokens; the vocabulary grows as text comes."""

    bos_token = "<|begin_of_text|>"
    bos_token_id = 1
    _vocab: ClassVar[dict[str, int]] = {bos_token: bos_token_id}
    _words: ClassVar[list[str]] = ["<unk>", bos_token]

    def encode(self, text: str, add_special_tokens: bool = True, **kwargs: Any) -> list[int]:
        ids = [self._id(piece) for piece in re.split(r"(<\|[a-z_]+\|>|\s+)", text) if piece]
        return [self.bos_token_id, *ids] if add_special_tokens else ids

    def decode(self, token_ids: list[int], skip_special_tokens: bool = False, **kwargs: Any) -> str:
        words = (self._words[i] for i in token_ids)
        return "".join(w for w in words if not (skip_special_tokens and w == self.bos_token))

    def apply_chat_template(
        self, conversation: list[dict[str, str]], tools: Any = None, *, tokenize: bool = True,
        add_generation_prompt: bool = False, return_dict: bool = True, **kwargs: Any
    ) -> str | list[int] | dict[str, list[int]]:
        text = self.bos_token + "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conversation)
        if add_generation_prompt:
            text += "<|im_start|>assistant\n"
        if not tokenize:
            return text
        ids = self.encode(text, add_special_tokens=False)
        return {"input_ids": ids, "attention_mask": [1] * len(ids)} if return_dict else ids

    def _id(self, piece: str) -> int:
        if piece not in self._vocab:
            self._vocab[piece] = len(self._words)
            self._words.append(piece)
        return self._vocab[piece]


class AsyncLLMEngine:
    """Answers each prompt after a short await (so concurrent requests interleave)."""

    #: Every engine built, newest last (tests inspect them).
    instances: ClassVar[list[AsyncLLMEngine]] = []

    def __init__(self, engine_args: AsyncEngineArgs) -> None:
        self.engine_args = engine_args
        self.vllm_config = SimpleNamespace(
            scheduler_config=SimpleNamespace(max_num_seqs=engine_args.max_num_seqs or DEFAULT_MAX_NUM_SEQS),
            parallel_config=SimpleNamespace(tensor_parallel_size=engine_args.tensor_parallel_size,
                                            pipeline_parallel_size=engine_args.pipeline_parallel_size))
        self.tokenizer: Any = _tokenizer(engine_args)
        self.requests: list[tuple[str, SamplingParams, str]] = []
        #: The token ids each request ran on.
        self.prompt_ids: list[list[int]] = []
        self.seen: list[list[int]] = []
        self.running = 0
        self.max_running = 0
        self.is_shut_down = False
        self.errored = False
        self._died: asyncio.Event | None = None
        # Like vLLM, the output handler binds to the loop running when it starts.
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        AsyncLLMEngine.instances.append(self)

    @classmethod
    def from_engine_args(
        cls, engine_args: AsyncEngineArgs, start_engine_loop: bool = True, usage_context: Any = None,
        stat_loggers: Any = None,
    ) -> AsyncLLMEngine:
        return cls(engine_args)

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def _token_ids(self, prompt: Any, tokenization_kwargs: dict[str, Any] | None) -> list[int]:
        """What vLLM runs: a ``TokensPrompt``'s ids as they are; text tokenized with special tokens."""
        if isinstance(prompt, dict) and "prompt_token_ids" in prompt:
            return list(prompt["prompt_token_ids"])
        text = prompt["prompt"] if isinstance(prompt, dict) else prompt
        return self.tokenizer.encode(text, **{"add_special_tokens": True, **(tokenization_kwargs or {})})

    def _last_user(self, ids: list[int]) -> str:
        """The last user message of a prompt (Mistral's template joins the system prompt to it)."""
        if getattr(self.tokenizer, "IS_MISTRAL_TOKENIZER", False):  # as vllm.utils.mistral tells them apart
            inst, end = (self.tokenizer.tokenizer.get_special_token(t) for t in ("[INST]", "[/INST]"))
            start = len(ids) - ids[::-1].index(inst) if inst in ids else 0
            turn = ids[start:ids.index(end, start)] if end in ids[start:] else ids[start:]
            return self.tokenizer.decode(turn, skip_special_tokens=True).rsplit("\n\n", 1)[-1]
        return self.tokenizer.decode(ids).rsplit("<|im_start|>user\n", 1)[-1].split("<|im_end|>")[0]

    def _die(self) -> None:
        self.errored = True
        assert self._died is not None
        self._died.set()

    async def generate(
        self, prompt: Any, sampling_params: SamplingParams, request_id: str, *, prompt_text: str | None = None,
        lora_request: Any = None, tokenization_kwargs: dict[str, Any] | None = None, trace_headers: Any = None,
        priority: int = 0, data_parallel_rank: int | None = None,
    ) -> AsyncGenerator[RequestOutput, None]:
        self.loop = self.loop or asyncio.get_running_loop()
        if asyncio.get_running_loop() is not self.loop:
            raise RuntimeError("the engine is used from another event loop than the one that built it")
        self._died = self._died or asyncio.Event()
        if self.errored:
            raise EngineDeadError()
        ids = self._token_ids(prompt, tokenization_kwargs)
        text = self.tokenizer.decode(ids)
        self.requests.append((text, sampling_params, request_id))
        self.prompt_ids.append(ids)
        if "RAISE" in text:
            raise ValueError("the fake engine was asked to fail")
        if "DIE" in text or _claim(os.environ.get("FAKE_VLLM_DIE_FILE")):
            self._die()
            raise EngineDeadError()
        cached = 0
        if self.engine_args.enable_prefix_caching:
            for earlier in self.seen:
                n = next((i for i, (a, b) in enumerate(zip(earlier, ids)) if a != b), min(len(earlier), len(ids)))
                cached = max(cached, n)
        self.seen.append(ids)
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if "HANG" in text:
                await asyncio.Event().wait()
            died = asyncio.ensure_future(self._died.wait())
            done, _ = await asyncio.wait([died], timeout=0.05 if "SLOW" not in text else 5.0)
            died.cancel()
            if done:
                raise EngineDeadError()
        finally:
            self.running -= 1
        so = sampling_params.structured_outputs
        if so is not None and so.grammar is not None:
            answer = "(fake | grammar | ?x)"
        else:
            answer = f"echo: {self._last_user(ids)}"
        tokens = answer.split()[: sampling_params.max_tokens]
        token_ids = list(range(len(tokens)))
        # As vLLM 0.33 does: with ``logprobs=k`` each position holds the sampled token's Logprob (and the k most
        # likely others'); without it, none. The fake's i-th token has log probability -(i + 1) / 8.
        logprobs = None if sampling_params.logprobs is None else [
            {token: Logprob(logprob=-(i + 1) / 8, rank=1, decoded_token=tokens[i])} for i, token in enumerate(token_ids)]
        output = CompletionOutput(index=0, text=" ".join(tokens), token_ids=token_ids,
                                  cumulative_logprob=None if logprobs is None else sum(-(i + 1) / 8 for i in token_ids),
                                  logprobs=logprobs, finish_reason="stop")
        if sampling_params.output_kind != RequestOutputKind.FINAL_ONLY:
            yield RequestOutput(request_id=request_id, prompt=text, prompt_token_ids=ids,
                                prompt_logprobs=None, outputs=[output], finished=False, num_cached_tokens=cached)
        yield RequestOutput(request_id=request_id, prompt=text, prompt_token_ids=ids,
                            prompt_logprobs=None, outputs=[output], finished=True, num_cached_tokens=cached)

    def shutdown(self, timeout: float | None = None) -> None:
        self.is_shut_down = True


def _tokenizer(args: AsyncEngineArgs) -> Any:
    """The tokenizer vLLM 0.33 serves ``args.model`` with (``tokenizer_mode``)."""
    if args.tokenizer_mode == "mistral" or (args.tokenizer_mode == "auto" and args.model.startswith("mistralai/")):
        from vllm.tokenizers.mistral import MistralTokenizer  # loads transformers: only when asked

        return MistralTokenizer.from_pretrained(args.model)
    return _Tokenizer()


def _claim(path: str | None) -> bool:
    """Whether this process removed the file ``path`` (only one process can)."""
    if not path:
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
