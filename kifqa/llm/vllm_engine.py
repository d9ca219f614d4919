"""The ``vllm`` backend: vLLM's async engine in this process (for GPU actors).

vLLM (:data:`VLLM_SUPPORTED`) is imported on first use, so kifqa runs without it. The engine lives on a
private event loop in a background thread: its output handler is bound to the loop that starts it, while
callers may come from ``generate`` (a fresh loop per call), a Ray actor's loop or the pipeline's. Prefix
caching is on, so requests sharing a few-shot prefix reuse its KV blocks.

What production needs of it:

- The prompt the model was trained on. The engine's tokenizer encodes the chat to token ids itself
  (``apply_chat_template(tokenize=True)``), and the engine gets those ids (``TokensPrompt``), which it
  runs as they are: one BOS (vLLM would add a second to rendered text, vLLM issue 9519), and Mistral's
  ``[INST]`` as control tokens. Rendered text tokenized again would not do: vLLM serves Mistral models
  through ``mistral_common`` (``tokenizer_mode`` ``auto``), which reads ``<s>[INST]`` in text as
  literal characters.
- A dead engine is reported, never hidden. vLLM's ``EngineDeadError``, or an engine that finishes
  nothing for a whole request timeout while a request waits, raises :class:`EngineDead` from
  :meth:`VllmLLM.agenerate`: the engine cannot serve again, and its process must be replaced (the
  LLM actor exits so that Ray restarts it). Any other failure is that request's error.
- Bounded pending requests. At most ``ceil(1.1 × max_num_seqs × pipeline_parallel_size)`` requests
  are in the engine at once (the engine's own resolved ``max_num_seqs``), as Ray Data LLM's vLLM stage
  bounds them: more only lengthen vLLM's waiting queue.
- Tensor and pipeline parallelism: ``tensor_parallel_size`` and ``pipeline_parallel_size`` among the
  engine options. With more than one GPU worker the engine uses vLLM's Ray executor, inside the
  placement group that :func:`kifqa.batch.llmpool.start_llm_pool` reserves for the actor.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from kifqa.errors import LLMError
from kifqa.llm import weights
from kifqa.llm.base import LLM, ChatRequest, Completion, Usage

#: The vLLM releases whose API this backend is written and tested against (the ``vllm`` extra installs them):
#: ``StructuredOutputsParams`` from 0.11; vLLM changes its Python API between minor releases.
VLLM_SUPPORTED = SpecifierSet(">=0.11,<0.34")
_INSTALL_HINT = f"the vllm backend needs vllm{VLLM_SUPPORTED}: pip install 'kifqa[vllm]'"
#: Pending requests per engine slot (``max_num_seqs`` × pipeline stages), as Ray Data LLM allows.
PENDING_PER_SEQ = 1.1


class EngineDead(LLMError):
    """The engine can serve no more requests: the process that holds it must be replaced."""


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
            timeout_s: Longest wait for one request; a late one is aborted. When no request at all
                finished during that wait, the engine is taken for dead (:class:`EngineDead`).
            engine_options: Further ``vllm.AsyncEngineArgs`` fields (e.g. ``gpu_memory_utilization``,
                ``tensor_parallel_size``, ``pipeline_parallel_size``, ``max_num_seqs``).
        """
        known = weights.KNOWN_MODELS.get(model)
        self.model = known.hf_repo if known else model
        self.context = context
        self.timeout_s = timeout_s
        self.engine_options = dict(engine_options or {})
        self.identity = f"vllm:{self.model}"
        self._engine: Any = None
        self._tokenizer: Any = None
        self._tokens_prompt: Any = None
        self._fatal: tuple[type[BaseException], ...] = ()
        self._pending: asyncio.Semaphore | None = None
        self._pending_limit: int | None = None
        #: monotonic() when the engine last finished a request (or started).
        self._progress_at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._start_lock: asyncio.Lock | None = None

    @property
    def max_pending(self) -> int | None:
        """The most requests in the engine at once (``None`` until the engine is built)."""
        return self._pending_limit

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Completions for ``requests``, in order; vLLM batches them (and other callers') together.
        Raises :class:`EngineDead` when the engine died."""
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
        """Imports vLLM, then builds the engine and reads its tokenizer and capacity."""
        try:
            import vllm
        except ImportError as e:
            raise LLMError(_INSTALL_HINT) from e
        if problem := vllm_version_problem(getattr(vllm, "__version__", "unknown")):
            raise LLMError(problem)
        try:  # vLLM >= 0.19 keeps the prompt forms in vllm.inputs.llm only
            from vllm.inputs.llm import TokensPrompt
        except ImportError:
            from vllm.inputs import TokensPrompt
        try:
            from vllm.v1.engine.exceptions import EngineDeadError

            self._fatal = (EngineDeadError,)
        except ImportError:
            self._fatal = ()
        options = dict(self.engine_options)
        workers = int(options.get("tensor_parallel_size", 1)) * int(options.get("pipeline_parallel_size", 1))
        if workers > 1:  # one GPU worker per rank, placed in the actor's placement group
            options.setdefault("distributed_executor_backend", "ray")
        args = vllm.AsyncEngineArgs(model=self.model, max_model_len=self.context, enable_prefix_caching=True,
                                    **options)
        engine = vllm.AsyncLLMEngine.from_engine_args(args)
        tokenizer = engine.get_tokenizer()
        if inspect.isawaitable(tokenizer):  # a coroutine in older vLLM
            tokenizer = await tokenizer
        self._pending_limit = _pending_limit(engine, options)
        self._pending = asyncio.Semaphore(self._pending_limit)
        self._engine, self._tokenizer, self._tokens_prompt = engine, tokenizer, TokensPrompt
        self._progress_at = time.monotonic()

    def prompt_ids(self, request: ChatRequest) -> list[int]:
        """The token ids of ``request`` as the tokenizer's chat template encodes them: its own special
        tokens (one BOS, Mistral's ``[INST]`` control tokens), none added and none read back from text.
        ``return_dict=False``: transformers 5 returns a mapping by default (vLLM's own renderer asks the same)."""
        return list(self._tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in request.messages],
            tokenize=True,
            add_generation_prompt=True,
            return_dict=False,
        ))

    async def _one(self, request: ChatRequest) -> Completion:
        """One request run to completion: its completion or its error; raises :class:`EngineDead`."""
        start = time.perf_counter()
        try:
            prompt = self._tokens_prompt(prompt_token_ids=self.prompt_ids(request))
            final = await asyncio.wait_for(self._final_output(prompt, request), self.timeout_s)
        except TimeoutError:
            if time.monotonic() - self._progress_at >= self.timeout_s:
                raise EngineDead(f"vllm: the engine finished no request in {self.timeout_s:g} s") from None
            return Completion(error=f"vllm: no answer within {self.timeout_s:g} s")
        except self._fatal as e:
            raise EngineDead(f"vllm: the engine died: {type(e).__name__}: {e}") from e
        except Exception as e:  # vLLM raises its own types for a request it cannot serve
            return Completion(error=f"vllm: {type(e).__name__}: {e}")
        self._progress_at = time.monotonic()
        output = final.outputs[0]
        return Completion(
            text=output.text,
            usage=Usage(
                prompt_tokens=len(final.prompt_token_ids or ()),
                completion_tokens=len(output.token_ids),
                cached_prompt_tokens=final.num_cached_tokens or 0,
                latency_s=time.perf_counter() - start,
            ),
            logprobs=sampled_logprobs(output),
        )

    async def _final_output(self, prompt: Any, request: ChatRequest) -> Any:
        """The finished ``RequestOutput`` for one prompt, once the engine has room for it."""
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
            logprobs=0,  # the sampled token's own log probability, no alternatives
        )
        assert self._pending is not None
        final = None
        async with self._pending:
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


def sampled_logprobs(output: Any) -> tuple[float, ...]:
    """The log probability of each token a ``CompletionOutput`` sampled: ``output.logprobs`` holds one
    ``{token_id: Logprob}`` per position (a list, or vLLM's ``FlatLogprobs``, indexed alike), the sampled
    token among them. None at all where a position lacks it (no logprobs were asked for)."""
    positions = output.logprobs
    if positions is None or len(positions) != len(output.token_ids):
        return ()
    values = []
    for token, position in zip(output.token_ids, positions, strict=True):
        entry = position.get(token) if position else None
        if entry is None or not math.isfinite(entry.logprob):
            return ()
        values.append(float(entry.logprob))
    return tuple(values)


def vllm_version_problem(version: str) -> str | None:
    """What is wrong with vLLM ``version`` (``vllm.__version__``) for this backend, or ``None`` when it is
    in :data:`VLLM_SUPPORTED`."""
    try:
        if VLLM_SUPPORTED.contains(Version(version), prereleases=True):
            return None
    except InvalidVersion:
        pass
    return f"vLLM {version} is installed, but {_INSTALL_HINT}"


def _pending_limit(engine: Any, options: Mapping[str, Any]) -> int:
    """``ceil(1.1 × max_num_seqs × pipeline_parallel_size)``, from the engine's resolved config (vLLM
    picks ``max_num_seqs`` by GPU) or else from the options; 256 sequences where neither says."""
    config = getattr(engine, "vllm_config", None)
    seqs = getattr(getattr(config, "scheduler_config", None), "max_num_seqs", None) or options.get("max_num_seqs")
    stages = (getattr(getattr(config, "parallel_config", None), "pipeline_parallel_size", None)
              or options.get("pipeline_parallel_size", 1))
    return math.ceil(PENDING_PER_SEQ * int(seqs or 256) * int(stages))
