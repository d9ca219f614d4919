"""The ``local`` backend: a GGUF model run in-process by llama.cpp's server engine (xllamacpp).

``xllamacpp.Server`` embeds llama.cpp's HTTP server (bound to a free port on 127.0.0.1) and also
answers OpenAI-style chat requests through ``handle_chat_completions(dict)``, a blocking call that
releases the GIL and is safe from several threads at once: requests share ``parallel`` slots that
llama.cpp decodes together (continuous batching). Each slot keeps its prompt's KV cache, so a new
request whose prompt starts like an earlier one (the same few-shot prefix) only evaluates the new
tokens. A request naming its shared prefix (``ChatRequest.prefix_key``, a few-shot block) is pinned
to a slot that holds that prefix; a slot that does not gets the prefix's KV state restored from disk
(:mod:`kifqa.llm.blockstate`; computed and saved once per machine and model) before the request.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kifqa.errors import ConfigError, LLMError
from kifqa.llm import weights
from kifqa.llm.aio import PerLoop
from kifqa.llm.base import LLM, ChatRequest, Completion, Message
from kifqa.llm.blockstate import BlockStats, StateKey, StateStore, model_sha256
from kifqa.llm.wire import chat_body, join_stream, parse_completion

log = logging.getLogger(__name__)

#: llama.cpp log level: 0 quiet, 1 errors, 2 warnings, 3 info.
_LOG_ERRORS = 1


class _Slots:
    """Which llama.cpp slot is busy and which shared prefix each holds (thread-safe; a wrong guess only
    costs time: llama.cpp reuses a slot's cache only for the tokens that match)."""

    def __init__(self, n: int) -> None:
        self._lock = threading.Lock()
        self._holds: list[str | None] = [None] * n
        self._busy = [False] * n
        self._used = [0] * n
        self._clock = 0

    def take(self, prefix: str | None) -> int | None:
        """A free slot for a request sharing ``prefix``: one that holds it, else one holding no prefix
        (when ``prefix`` is None), else the least recently used; None when all are busy."""
        with self._lock:
            free = [i for i in range(len(self._busy)) if not self._busy[i]]
            if not free:
                return None
            holding = [i for i in free if self._holds[i] == prefix]
            slot = holding[0] if holding else min(free, key=self._used.__getitem__)
            self._busy[slot] = True
            self._clock += 1
            self._used[slot] = self._clock
            return slot

    def give(self, slot: int) -> None:
        with self._lock:
            self._busy[slot] = False

    def holds(self, slot: int) -> str | None:
        with self._lock:
            return self._holds[slot]

    def set(self, slot: int, prefix: str | None) -> None:
        with self._lock:
            self._holds[slot] = prefix


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
        decoding: int = 1,
        threads: int = 1,
        timeout_s: float = 120.0,
        cache_prompt: bool = True,
        persist_blocks: bool = True,
        state_dir: Path | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """Configures (without loading) a local model.

        Args:
            model: A known model name (see :data:`kifqa.llm.weights.KNOWN_MODELS`) or a ``.gguf`` path.
            cache_dir: kifqa's cache folder; known models are assembled under ``models/`` there.
            context: Context length of each slot, in tokens.
            parallel: Slots, each keeping its own prompt cache (a few-shot block).
            decoding: Requests decoded at once (at most ``parallel``); the others wait their turn.
            threads: CPU threads for generation and for prompt evaluation.
            timeout_s: Longest wait for one request once it holds a slot with its shared prefix in place.
            cache_prompt: Reuse a slot's KV cache for a shared prompt prefix (llama.cpp's
                ``cache_prompt``); off only to measure what it saves.
            persist_blocks: Keep the KV state of each shared prefix (``ChatRequest.prefix_key``) under
                ``state_dir`` and restore it into a slot instead of evaluating it again.
            state_dir: Where the prefix states are kept (default ``<cache_dir>/kv``).
            options: Further ``xllamacpp.CommonParams`` attributes, set as given (e.g. ``n_batch``).
        """
        if min(parallel, decoding, threads, context) < 1:
            raise ConfigError("local model: parallel, decoding, threads and context must be at least 1")
        self.model = model
        self.cache_dir = Path(cache_dir)
        self.context = context
        self.parallel = parallel
        self.threads = threads
        self.timeout_s = timeout_s
        self.cache_prompt = cache_prompt
        self.persist_blocks = persist_blocks and cache_prompt
        self.state_dir = Path(state_dir) if state_dir is not None else self.cache_dir / "kv"
        self.options = dict(options or {})
        self._blocks = BlockStats()
        known = weights.KNOWN_MODELS.get(model)
        self.identity = f"llama.cpp:{known.identity if known else Path(model).name}"
        self._server: Any = None
        #: The embedded server's key, new in each process: its HTTP port is open to every local user.
        self._key = secrets.token_urlsafe(32)
        self._closed = False
        self._load_lock = threading.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="llama")
        self.decoding = min(decoding, parallel)
        self._slots: PerLoop[asyncio.Semaphore] = PerLoop(lambda: asyncio.Semaphore(self.decoding))
        self._slot_table = _Slots(parallel)
        self._store: StateStore | None = None
        self._state_base: dict[str, Any] = {}
        #: Shared prefixes met so far: their messages (as JSON) → the key of their KV state.
        self._prefix_keys: dict[str, StateKey] = {}
        self._prefix_locks: dict[str, threading.Lock] = {}
        self._prefix_lock = threading.Lock()

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
            # Only kifqa talks to the HTTP port (template, tokenizer, slot save and restore): with its key.
            # The slots' monitor (GET /slots) is off; slot actions stay on only with ``slot_save_path``.
            params.api_keys = [self._key]
            params.endpoint_slots = False
            for name, value in self.options.items():
                if not hasattr(params, name):
                    raise ConfigError(f"local model: xllamacpp.CommonParams has no option {name!r}")
                setattr(params, name, value)
            if self.persist_blocks:
                self._store = StateStore(self.state_dir)
                params.slot_save_path = str(self._store.folder) + os.sep  # llama.cpp appends the file name
                self._state_base = {
                    "model_sha256": model_sha256(Path(params.model.path), self.model, folder=self._store.folder),
                    "llama_build": f"xllamacpp {xllamacpp.__version__} "
                                   f"{json.dumps(xllamacpp.BUILD_INFO, sort_keys=True)}",
                    # A state holds llama.cpp's KV streams, one per slot (unless kv_unified): an instance
                    # with another slot count cannot restore it ("n_stream mismatch").
                    "context": {"n_ctx_slot": self.context, "n_parallel": params.n_parallel,
                                **{n: str(getattr(params, n)) for n in (
                        "cache_type_k", "cache_type_v", "flash_attn_type", "n_batch", "n_ubatch", "swa_full",
                        "kv_unified")}},
                }
            try:
                self._server = xllamacpp.Server(params)
            except RuntimeError as e:
                raise LLMError(f"llama.cpp could not load {params.model.path}: {e}") from e

    async def aload(self) -> None:
        """Loads the model (:meth:`load`) without decoding anything."""
        await asyncio.get_running_loop().run_in_executor(None, self.load)

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Completions for ``requests``, in order; at most ``decoding`` run at once."""
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
        prefix = _shared_prefix(request) if self.persist_blocks else None
        slots = self._slots.get()
        await slots.acquire()
        # With saved prefixes, requests are pinned to slots (llama.cpp otherwise picks the slot whose cache
        # matches most, which cannot know of a prefix it could restore).
        slot = self._slot_table.take(_prefix_id(prefix)) if self.persist_blocks else None
        stop = threading.Event()
        loop = asyncio.get_running_loop()
        # Set once the slot holds the shared prefix: restoring it, or computing it once per machine, is not
        # the request's own time and does not count against ``timeout_s``.
        ready: asyncio.Future[None] = loop.create_future()

        def set_ready() -> None:
            if not ready.done():
                ready.set_result(None)

        def on_ready() -> None:
            loop.call_soon_threadsafe(set_ready)

        call = loop.run_in_executor(self._executor, self._call, body, stop, slot, prefix, on_ready)

        def release(_: object) -> None:
            if slot is not None:
                self._slot_table.give(slot)
            slots.release()

        # The slot is freed when llama.cpp is done, not when a caller stops waiting: a caller that gives up
        # (this timeout, or a question timeout cancelling it) sets ``stop``, and llama.cpp ends the request
        # at its next token.
        call.add_done_callback(release)
        try:
            either: list[asyncio.Future[Any]] = [ready, call]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            return await asyncio.wait_for(asyncio.shield(call), self.timeout_s)
        except TimeoutError:
            stop.set()
            return Completion(error=f"local model: no answer within {self.timeout_s:g} s")
        except asyncio.CancelledError:
            stop.set()
            raise

    def _call(self, body: dict[str, Any], stop: threading.Event, slot: int | None, prefix: tuple[Message, ...] | None,
              on_ready: Callable[[], None]) -> Completion:
        """One blocking chat completion on ``slot`` (any when None), its shared ``prefix`` restored there
        first (then ``on_ready`` is called), streamed so that setting ``stop`` cancels it (runs in a worker
        thread): xllamacpp hands each chunk to the callback, and a true return ends the request, which frees
        its llama.cpp slot."""
        start = time.perf_counter()
        chunks: list[Any] = []
        if slot is not None:
            body["id_slot"] = slot
            if prefix is None:
                self._slot_table.set(slot, None)
            elif self._slot_table.holds(slot) != _prefix_id(prefix):
                try:
                    self._put_prefix(slot, prefix)
                except (LLMError, ValueError, RuntimeError) as e:
                    # A saved state that cannot be used never fails the request: llama.cpp evaluates the prefix.
                    log.warning("shared prefix not restored or saved: %s", e)
                    self._slot_table.set(slot, None)
        on_ready()

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

    def blocks(self) -> BlockStats:
        """What restoring and computing this instance's shared prefixes cost so far."""
        return self._blocks

    def prepare(self, request: ChatRequest) -> str:
        """Makes sure the KV state of ``request``'s shared prefix is saved (blocking; loads the model):
        ``"restored"`` if a valid state was on disk (it is loaded into a slot to check it),
        ``"computed"`` if it was evaluated and saved now, ``"none"`` if the request shares none."""
        self.load()
        prefix = _shared_prefix(request) if self.persist_blocks else None
        if prefix is None:
            return "none"
        before = self._blocks.computed
        slot = None
        while slot is None:
            slot = self._slot_table.take(_prefix_id(prefix))
            if slot is None:
                time.sleep(0.01)
        try:
            self._put_prefix(slot, prefix)
        finally:
            self._slot_table.give(slot)
        return "computed" if self._blocks.computed > before else "restored"

    def _put_prefix(self, slot: int, prefix: tuple[Message, ...]) -> None:
        """Loads ``prefix``'s KV state into ``slot``: restored from its file when that is valid, else
        evaluated there and saved (one thread per prefix at a time: the others then restore it)."""
        assert self._store is not None
        pid = _messages_id(prefix)
        with self._prefix_lock:
            lock = self._prefix_locks.setdefault(pid, threading.Lock())
        with lock:
            key = self._prefix_keys.get(pid) or self._state_key(prefix)
            self._prefix_keys[pid] = key
            start = time.perf_counter()
            name = self._store.name(key)
            path = self._store.folder / name
            if path.exists() and self._store.valid(key):
                try:
                    done = self._http(f"/slots/{slot}?action=restore", {"filename": name})
                except LLMError:
                    done = {}
                if done.get("n_restored") == len(key.tokens):
                    self._blocks.restored += 1
                    self._blocks.restore_s += time.perf_counter() - start
                    self._blocks.bytes += int(done.get("n_read", 0))
                    self._slot_table.set(slot, pid)
                    return
            if path.exists():
                self._blocks.refused += 1
            self._slot_table.set(slot, None)
            done = self._server.handle_completions(
                {"prompt": list(key.tokens), "n_predict": 0, "id_slot": slot, "cache_prompt": True})
            if not isinstance(done, Mapping) or "error" in done:
                raise LLMError(f"local model: could not evaluate a shared prefix: {done}")
            temp = self._store.temp_name(key)
            try:
                saved = self._http(f"/slots/{slot}?action=save", {"filename": temp})
                if saved.get("n_saved") != len(key.tokens):
                    raise LLMError(f"local model: saved {saved.get('n_saved')} of {len(key.tokens)} prefix tokens")
                self._blocks.bytes += self._store.commit(key, temp)
            finally:
                self._store.discard(temp)
            self._blocks.computed += 1
            self._blocks.compute_s += time.perf_counter() - start
            self._slot_table.set(slot, pid)

    def _state_key(self, prefix: tuple[Message, ...]) -> StateKey:
        """The key of ``prefix``'s state: its exact tokens are the tokens two prompts continuing it with
        different user turns have in common (the chat template renders the prefix's end itself)."""
        rendered = []
        for probe in ("a", "b"):
            messages = [{"role": m.role, "content": m.content} for m in prefix] + [{"role": "user", "content": probe}]
            prompt = self._http("/apply-template", {"messages": messages})["prompt"]
            rendered.append(self._http("/tokenize", {"content": prompt, "add_special": True,
                                                     "parse_special": True})["tokens"])
        first, second = rendered
        n = 0
        while n < min(len(first), len(second)) and first[n] == second[n]:
            n += 1
        if n == 0:
            raise LLMError("local model: the chat template renders no common prefix for these messages")
        return StateKey(tokens=tuple(first[:n]), **self._state_base)

    def _http(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """A POST to the embedded server's HTTP endpoint (tokenizer, template and slot actions, which
        xllamacpp exposes only there)."""
        url = self._server.listening_address + path
        request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {self._key}"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                return json.load(answer)
        except (urllib.error.URLError, OSError, ValueError) as e:
            detail = e.read().decode(errors="replace")[:300] if isinstance(e, urllib.error.HTTPError) else ""
            raise LLMError(f"local model: {path} failed: {e} {detail}".strip()) from e

    async def aclose(self) -> None:
        """Waits for running requests, then frees the model."""
        await asyncio.get_running_loop().run_in_executor(None, self._close)

    def _close(self) -> None:
        """Blocking part of :meth:`aclose`."""
        self._closed = True
        self._executor.shutdown(wait=True)
        with self._load_lock:
            self._server = None


def _shared_prefix(request: ChatRequest) -> tuple[Message, ...] | None:
    """The leading messages ``request.prefix_key`` names (all but the last unless
    ``prefix_messages`` says how many), or None when the request shares none."""
    if request.prefix_key is None:
        return None
    n = request.prefix_messages if request.prefix_messages is not None else len(request.messages) - 1
    return request.messages[:n] if 0 < n < len(request.messages) else None


def _prefix_id(prefix: tuple[Message, ...] | None) -> str | None:
    """A shared prefix's identity within this process (its messages)."""
    return None if prefix is None else _messages_id(prefix)


def _messages_id(messages: tuple[Message, ...]) -> str:
    """The identity of a run of messages within this process."""
    return json.dumps([(m.role, m.content) for m in messages])
