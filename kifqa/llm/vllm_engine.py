"""The ``vllm`` backend: vLLM's async engine in this process (for GPU actors).

vLLM (>= 0.10.2, for ``StructuredOutputsParams``) is imported on first use, so kifqa runs without
it. The engine lives on a private event loop in a background thread: its output handler is bound
to the loop that starts it, while callers may come from ``generate`` (a fresh loop per call), a
Ray actor's loop or the pipeline's. Prompts are rendered with the model's chat template; prefix
caching is on, so requests sharing a few-shot prefix reuse its KV blocks.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from kifqa.errors import LLMError
from kifqa.llm import weights
from kifqa.llm.base import LLM, ChatRequest, Completion, Usage

_INSTALL_HINT = "the vllm backend needs vLLM >= 0.10.2: pip install 'kifqa[vllm]'"


class VllmLLM(LLM):
    """A Hugging Face model served by an in-process ``vllm.AsyncLLMEngine``, decoded greedily."""

    def __init__(
        self,
        *,
        model: str,
        context: int = 4096,
        timeout_s: float = 120.0,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        """Configures (without starting) the engine.

        Args:
            model: A Hugging Face model id, a local model folder, or a known model name (its
                Hugging Face repository is loaded).
            context: ``max_model_len``: prompt plus output tokens per request.
            timeout_s: Longest wait for one request; a late one is aborted.
            engine_options: Further ``vllm.AsyncEngineArgs`` fields (e.g. ``gpu_memory_utilization``).
        """
        known = weights.KNOWN_MODELS.get(model)
        self.model = known.hf_repo if known else model
        self.context = context
        self.timeout_s = timeout_s
        self.engine_options = dict(engine_options or {})
        self.identity = f"vllm:{self.model}"
        self._engine: Any = None
        self._tokenizer: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._start_lock: asyncio.Lock | None = None

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Completions for ``requests``, in order; vLLM batches them (and other callers') together."""
        if not requests:
            return []
        return await asyncio.wrap_future(self._submit(self._generate_all(requests)))

    def _submit(self, coroutine: Any) -> Future[Any]:
        """Runs ``coroutine`` on the engine's loop, starting that loop's thread on first use."""
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._start_lock = asyncio.Lock()
                self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-loop", daemon=True)
                self._thread.start()
            return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    async def _generate_all(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Starts the engine if needed and runs ``requests`` together (on the engine loop)."""
        await self._start()
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def _start(self) -> None:
        """Builds the engine and its tokenizer (on the engine loop, once)."""
        assert self._start_lock is not None
        async with self._start_lock:
            if self._engine is None:
                await self._build()

    async def _build(self) -> None:
        """Imports vLLM, then builds the engine and reads its tokenizer."""
        try:
            import vllm
            from vllm.sampling_params import StructuredOutputsParams  # noqa: F401  (version check)
        except ImportError as e:
            raise LLMError(_INSTALL_HINT) from e
        args = vllm.AsyncEngineArgs(
            model=self.model,
            max_model_len=self.context,
            enable_prefix_caching=True,
            **self.engine_options,
        )
        engine = vllm.AsyncLLMEngine.from_engine_args(args)
        tokenizer = engine.get_tokenizer()
        if inspect.isawaitable(tokenizer):  # a coroutine in older vLLM
            tokenizer = await tokenizer
        self._engine, self._tokenizer = engine, tokenizer

    async def _one(self, request: ChatRequest) -> Completion:
        """One request rendered with the chat template and run to completion (never raises)."""
        start = time.perf_counter()
        try:
            prompt = self._tokenizer.apply_chat_template(
                [{"role": m.role, "content": m.content} for m in request.messages],
                tokenize=False,
                add_generation_prompt=True,
            )
            final = await asyncio.wait_for(self._final_output(prompt, request), self.timeout_s)
        except TimeoutError:
            return Completion(error=f"vllm: no answer within {self.timeout_s:g} s")
        except Exception as e:  # vLLM raises its own types for a request it cannot serve
            return Completion(error=f"vllm: {type(e).__name__}: {e}")
        output = final.outputs[0]
        return Completion(
            text=output.text,
            usage=Usage(
                prompt_tokens=len(final.prompt_token_ids or ()),
                completion_tokens=len(output.token_ids),
                cached_prompt_tokens=final.num_cached_tokens or 0,
                latency_s=time.perf_counter() - start,
            ),
        )

    async def _final_output(self, prompt: str, request: ChatRequest) -> Any:
        """The finished ``RequestOutput`` for one prompt."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        params = SamplingParams(
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            stop=list(request.stop) or None,
            structured_outputs=(
                StructuredOutputsParams(grammar=request.grammar) if request.grammar is not None else None
            ),
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        final = None
        async for output in self._engine.generate(prompt, params, request_id=uuid.uuid4().hex):
            final = output
        if final is None or not final.outputs:
            raise LLMError("the engine finished without an output")
        return final

    async def aclose(self) -> None:
        """Shuts the engine down and stops its loop."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        if self._engine is not None:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._shutdown(), loop))
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
        loop.close()

    async def _shutdown(self) -> None:
        """Stops the engine (on its loop)."""
        self._engine.shutdown()
        self._engine = self._tokenizer = None
