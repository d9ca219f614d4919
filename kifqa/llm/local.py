"""The ``local`` backend: a GGUF model run in-process by llama.cpp's server engine (xllamacpp).

``xllamacpp.Server`` embeds llama.cpp's HTTP server (bound to a free port on 127.0.0.1) and also
answers OpenAI-style chat requests through ``handle_chat_completions(dict)``, a blocking call that
releases the GIL and is safe from several threads at once: requests share ``parallel`` slots that
llama.cpp decodes together (continuous batching). Each slot keeps its prompt's KV cache, so a new
request whose prompt starts like an earlier one (the same few-shot prefix) only evaluates the new
tokens; llama.cpp also saves evicted slot prompts in RAM and restores them on a later match.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kifqa.errors import ConfigError, LLMError
from kifqa.llm import weights
from kifqa.llm.aio import PerLoop
from kifqa.llm.base import LLM, ChatRequest, Completion
from kifqa.llm.wire import chat_body, join_stream, parse_completion

#: llama.cpp log level: 0 quiet, 1 errors, 2 warnings, 3 info.
_LOG_ERRORS = 1


class LocalLLM(LLM):
    """A GGUF chat model decoded greedily on the CPU by llama.cpp, in this process.

    The model loads on the first request (or :meth:`load`); until then the object is cheap, which
    lets a replaying cache wrap it without ever loading it.
    """

    def __init__(
        self,
        *,
        model: str = weights.DEFAULT_MODEL,
        cache_dir: Path,
        context: int = 4096,
        parallel: int = 4,
        threads: int = 1,
        timeout_s: float = 120.0,
        cache_prompt: bool = True,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """Configures (without loading) a local model.

        Args:
            model: A known model name (see :data:`kifqa.llm.weights.KNOWN_MODELS`) or a ``.gguf`` path.
            cache_dir: kifqa's cache folder; known models are assembled under ``models/`` there.
            context: Context length of each slot, in tokens.
            parallel: Slots decoded together; also how many requests are in flight at once.
            threads: CPU threads for generation and for prompt evaluation.
            timeout_s: Longest wait for one request once it holds a slot.
            cache_prompt: Reuse a slot's KV cache for a shared prompt prefix (llama.cpp's
                ``cache_prompt``); off only to measure what it saves.
            options: Further ``xllamacpp.CommonParams`` attributes, set as given (e.g. ``n_batch``).
        """
        if parallel < 1 or threads < 1 or context < 1:
            raise ConfigError("local model: parallel, threads and context must be at least 1")
        self.model = model
        self.cache_dir = Path(cache_dir)
        self.context = context
        self.parallel = parallel
        self.threads = threads
        self.timeout_s = timeout_s
        self.cache_prompt = cache_prompt
        self.options = dict(options or {})
        known = weights.KNOWN_MODELS.get(model)
        self.identity = f"llama.cpp:{known.identity if known else Path(model).name}"
        self._server: Any = None
        self._closed = False
        self._load_lock = threading.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="llama")
        self._slots: PerLoop[asyncio.Semaphore] = PerLoop(lambda: asyncio.Semaphore(parallel))

    def load(self) -> None:
        """Loads the model now (blocking) unless it is loaded already; assembles its file if needed."""
        with self._load_lock:
            if self._server is not None:
                return
            try:
                import xllamacpp
            except ImportError as e:
                raise LLMError("the local backend needs xllamacpp: pip install 'kifqa[local]'") from e
            params = xllamacpp.CommonParams()
            params.model.path = str(weights.resolve(self.model, cache_dir=self.cache_dir))
            params.n_parallel = self.parallel
            params.n_ctx = self.context * self.parallel
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
            params.sampling.temp = 0.0
            params.cache_prompt = self.cache_prompt
            params.verbosity = _LOG_ERRORS
            for name, value in self.options.items():
                if not hasattr(params, name):
                    raise ConfigError(f"local model: xllamacpp.CommonParams has no option {name!r}")
                setattr(params, name, value)
            try:
                self._server = xllamacpp.Server(params)
            except RuntimeError as e:
                raise LLMError(f"llama.cpp could not load {params.model.path}: {e}") from e

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Completions for ``requests``, in order; at most ``parallel`` run at once."""
        if self._closed:
            raise LLMError("local model: used after aclose()")
        if not requests:
            return []
        await asyncio.get_running_loop().run_in_executor(None, self.load)
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def _one(self, request: ChatRequest) -> Completion:
        """One request on a free slot, as a completion (never raises)."""
        body = chat_body(request)
        body["cache_prompt"] = self.cache_prompt
        if request.grammar is not None:
            body["grammar"] = request.grammar
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        slots = self._slots.get()
        await slots.acquire()
        stop = threading.Event()
        call = asyncio.get_running_loop().run_in_executor(self._executor, self._call, body, stop)
        # The slot is freed when llama.cpp is done, not when a caller stops waiting: a caller that gives up
        # (this timeout, or a question timeout cancelling it) sets ``stop``, and llama.cpp ends the request
        # at its next token.
        call.add_done_callback(lambda _: slots.release())
        try:
            return await asyncio.wait_for(asyncio.shield(call), self.timeout_s)
        except TimeoutError:
            stop.set()
            return Completion(error=f"local model: no answer within {self.timeout_s:g} s")
        except asyncio.CancelledError:
            stop.set()
            raise

    def _call(self, body: dict[str, Any], stop: threading.Event) -> Completion:
        """One blocking chat completion, streamed so that setting ``stop`` cancels it (runs in a worker
        thread): xllamacpp hands each chunk to the callback, and a true return ends the request, which
        frees its llama.cpp slot."""
        start = time.perf_counter()
        chunks: list[Any] = []

        def collect(chunk: Any) -> bool:
            chunks.append(chunk)
            return stop.is_set()

        try:
            self._server.handle_chat_completions(body, collect)
        except Exception as e:  # xllamacpp raises ValueError and others for requests it refuses
            return Completion(error=f"local model rejected the request: {e}")
        if stop.is_set():
            return Completion(error="local model: cancelled")
        return parse_completion(join_stream(chunks), latency_s=time.perf_counter() - start)

    async def aclose(self) -> None:
        """Waits for running requests, then frees the model."""
        await asyncio.get_running_loop().run_in_executor(None, self._close)

    def _close(self) -> None:
        """Blocking part of :meth:`aclose`."""
        self._closed = True
        self._executor.shutdown(wait=True)
        with self._load_lock:
            self._server = None
