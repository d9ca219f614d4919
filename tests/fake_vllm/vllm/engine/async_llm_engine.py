"""``vllm.engine.async_llm_engine`` stand-in: an async engine with a trivial deterministic model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any, ClassVar

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.sampling_params import RequestOutputKind, SamplingParams


class _Tokenizer:
    """Renders chat messages like a ChatML template."""

    def apply_chat_template(
        self, conversation: list[dict[str, str]], tools: Any = None, *, tokenize: bool = True,
        add_generation_prompt: bool = False, **kwargs: Any
    ) -> str | list[int]:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conversation)
        if add_generation_prompt:
            text += "<|im_start|>assistant\n"
        return text.split() if tokenize else text


class AsyncLLMEngine:
    """Answers each prompt after a short await (so concurrent requests interleave)."""

    #: Every engine built, newest last (tests inspect them).
    instances: ClassVar[list[AsyncLLMEngine]] = []

    def __init__(self, engine_args: AsyncEngineArgs) -> None:
        self.engine_args = engine_args
        self.requests: list[tuple[str, SamplingParams, str]] = []
        self.seen: list[list[str]] = []
        self.running = 0
        self.max_running = 0
        self.is_shut_down = False
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

    def get_tokenizer(self) -> _Tokenizer:
        return _Tokenizer()

    async def generate(
        self, prompt: str, sampling_params: SamplingParams, request_id: str, *, prompt_text: str | None = None,
        lora_request: Any = None, tokenization_kwargs: Any = None, trace_headers: Any = None, priority: int = 0,
        data_parallel_rank: int | None = None,
    ) -> AsyncGenerator[RequestOutput, None]:
        self.loop = self.loop or asyncio.get_running_loop()
        if asyncio.get_running_loop() is not self.loop:
            raise RuntimeError("the engine is used from another event loop than the one that built it")
        self.requests.append((prompt, sampling_params, request_id))
        if "RAISE" in prompt:
            raise ValueError("the fake engine was asked to fail")
        words = prompt.split()
        cached = 0
        if self.engine_args.enable_prefix_caching:
            for earlier in self.seen:
                n = next((i for i, (a, b) in enumerate(zip(earlier, words)) if a != b), min(len(earlier), len(words)))
                cached = max(cached, n)
        self.seen.append(words)
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            await asyncio.sleep(0.05 if "SLOW" not in prompt else 5.0)
        finally:
            self.running -= 1
        so = sampling_params.structured_outputs
        if so is not None and so.grammar is not None:
            text = "(fake | grammar | ?x)"
        else:
            last_user = prompt.rsplit("<|im_start|>user\n", 1)[-1].split("<|im_end|>")[0]
            text = f"echo: {last_user}"
        tokens = text.split()[: sampling_params.max_tokens]
        output = CompletionOutput(index=0, text=" ".join(tokens), token_ids=list(range(len(tokens))),
                                  cumulative_logprob=None, logprobs=None, finish_reason="stop")
        if sampling_params.output_kind != RequestOutputKind.FINAL_ONLY:
            yield RequestOutput(request_id=request_id, prompt=prompt, prompt_token_ids=list(range(len(words))),
                                prompt_logprobs=None, outputs=[output], finished=False, num_cached_tokens=cached)
        yield RequestOutput(request_id=request_id, prompt=prompt, prompt_token_ids=list(range(len(words))),
                            prompt_logprobs=None, outputs=[output], finished=True, num_cached_tokens=cached)

    def shutdown(self, timeout: float | None = None) -> None:
        self.is_shut_down = True
