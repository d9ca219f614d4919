"""The pool of LLM actors and :class:`ActorLLM`, the :class:`LLM` that forwards to it.

Each actor holds one model (a llama.cpp process on CPU, a vLLM engine on a GPU). Actors are async
with a high ``max_concurrency``: the requests of many questions reach the backend together and the
backend batches them (llama.cpp's parallel slots, vLLM's continuous batching).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import cast

import ray
from ray import ObjectRef
from ray.actor import ActorHandle
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayError

from kifqa.config import Settings
from kifqa.llm.aio import PerLoop
from kifqa.llm.base import LLM, ChatRequest, Completion, Message
from kifqa.llm.blockstate import BlockStats
from kifqa.llm.routing import LeastLoaded
from kifqa.resilience import open_circuits

#: Opens the model the settings name (:func:`kifqa.llm.open_llm`).
LLMFactory = Callable[[Settings], LLM]

_WARM_UP = ChatRequest(messages=(Message("user", "Hi"),), max_tokens=1)


class BusyClock:
    """Wall time during which at least one call was in flight."""

    def __init__(self) -> None:
        self._in_flight = 0
        self._since = 0.0
        self._total = 0.0

    def __enter__(self) -> None:
        if self._in_flight == 0:
            self._since = time.perf_counter()
        self._in_flight += 1

    def __exit__(self, *exc: object) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._total += time.perf_counter() - self._since

    @property
    def seconds(self) -> float:
        running = time.perf_counter() - self._since if self._in_flight else 0.0
        return self._total + running


class LLMActor:
    """Holds one model and serves its requests (run as a Ray actor: see :func:`start_llm_pool`)."""

    def __init__(self, settings: Settings, open_llm: LLMFactory) -> None:
        self._settings = settings.with_batch_outages()
        self._open_llm = open_llm
        self._llm: LLM | None = None
        self._busy = BusyClock()

    def _model(self) -> LLM:
        """The model, opened on first use: a failure to open it is that call's error."""
        if self._llm is None:
            self._llm = self._open_llm(self._settings)
        return self._llm

    async def warm(self) -> str:
        """Loads the model (backends load lazily) with a one-token request; returns its identity."""
        await self._model().agenerate([_WARM_UP])
        return self._model().identity

    async def agenerate(self, requests: list[ChatRequest]) -> list[Completion]:
        with self._busy:
            return await self._model().agenerate(requests)

    async def open_circuits(self) -> dict[str, float]:
        """The endpoints this actor's process has found down (circuit open), and for how many seconds."""
        return open_circuits()

    async def cpu_seconds(self) -> float:
        """CPU seconds this actor's process has used (all its threads)."""
        return time.process_time()

    async def blocks(self) -> BlockStats | None:
        """What restoring and computing the model's few-shot block states cost so far (None: it keeps none)."""
        return self._llm.blocks() if self._llm is not None else None

    async def busy_seconds(self) -> float:
        """Wall time the model spent with at least one request in flight."""
        return self._busy.seconds

    async def aclose(self) -> None:
        if self._llm is not None:
            await self._llm.aclose()


class ActorLLM(LLM):
    """An :class:`LLM` whose requests go to the least busy actor of an LLM pool, or, for requests
    sharing a prompt prefix (:attr:`ChatRequest.prefix_key`), to the actor that prefix belongs to.

    The requests made in one turn of the event loop (a task's questions that reached a model step together)
    travel to each actor up to ``per_call`` in one call (:attr:`LLMSettings.requests_per_call`): a Ray call
    costs its caller and the actor about a millisecond of CPU each."""

    def __init__(self, actors: list[ActorHandle], identity: str, *, per_call: int = 1) -> None:
        self.identity = identity
        self.per_call = per_call
        self._pool = LeastLoaded(actors)
        # A shard task runs its questions on a loop of its own, and a worker keeps this object for the next task.
        self._waiting: PerLoop[list[tuple[ChatRequest, asyncio.Future[Completion]]]] = PerLoop(list)
        self._calls: set[asyncio.Task[None]] = set()

    def __reduce__(self) -> tuple[Callable[..., ActorLLM], tuple[list[ActorHandle], str, int]]:
        return _actor_llm, (self._pool.members, self.identity, self.per_call)

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in requests]
        waiting = self._waiting.get()
        if futures and not waiting:
            loop.call_soon(self._send)  # after this turn's other callers have added theirs
        waiting += zip(requests, futures)
        try:
            return [await f for f in futures]
        except asyncio.CancelledError:
            # The caller gave up (a question timeout): a call whose every request is given up is cancelled
            # in the actor too, so the backend stops them (a llama.cpp slot, an HTTP request).
            for f in futures:
                f.cancel()
            raise

    def _send(self) -> None:
        """Sends the waiting requests, up to :attr:`per_call` a call to each actor."""
        waiting = self._waiting.pop() or []
        by_actor: dict[int, tuple[ActorHandle, ExitStack, list[tuple[ChatRequest, asyncio.Future[Completion]]]]] = {}
        for request, future in waiting:
            if future.done():
                continue  # its caller gave up
            pick = ExitStack()
            actor = pick.enter_context(self._pool.pick(request.prefix_key))  # busy until the call ends
            _, picks, batch = by_actor.get(id(actor)) or (actor, ExitStack(), [])
            if len(batch) == self.per_call:
                self._start(actor, batch, picks)
                picks, batch = ExitStack(), []
            by_actor[id(actor)] = (actor, picks, batch)
            picks.enter_context(pick)
            batch.append((request, future))
        for actor, picks, batch in by_actor.values():
            self._start(actor, batch, picks)

    def _start(self, actor: ActorHandle, batch: list[tuple[ChatRequest, asyncio.Future[Completion]]],
               picks: ExitStack, tries: int = 0) -> None:
        task = asyncio.get_running_loop().create_task(self._call(actor, batch, picks, tries))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _call(self, actor: ActorHandle, batch: list[tuple[ChatRequest, asyncio.Future[Completion]]],
                    picks: ExitStack, tries: int) -> None:
        with picks:
            call: ObjectRef[list[Completion]] = actor.agenerate.remote([request for request, _ in batch])
            futures = [future for _, future in batch]

            def given_up(_: asyncio.Future[Completion]) -> None:
                if all(f.cancelled() for f in futures):
                    ray.cancel(call)

            for future in futures:
                future.add_done_callback(given_up)
            completions: list[Completion] | None
            try:
                completions = await call
            except RayError as err:
                if isinstance(err, (ActorUnavailableError, ActorDiedError)) and tries < len(_ACTOR_BACKOFF_S):
                    completions = None  # its node was lost: sent again below, once Ray may have restarted it
                else:
                    failed = f"LLM actor failed: {type(err).__name__}: {str(err).partition(chr(10))[0]}"
                    completions = [Completion(error=failed)] * len(batch)
        if completions is None:
            await asyncio.sleep(_ACTOR_BACKOFF_S[tries])
            if pending := [(request, future) for request, future in batch if not future.done()]:
                pick = ExitStack()
                self._start(pick.enter_context(self._pool.pick(pending[0][0].prefix_key)), pending, pick, tries + 1)
            return
        for future, completion in zip(futures, completions, strict=True):
            if not future.done():
                future.set_result(completion)


#: Seconds before a call whose actor was unavailable (its node lost, Ray restarting it) is sent again.
_ACTOR_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


def _actor_llm(actors: list[ActorHandle], identity: str, per_call: int) -> ActorLLM:
    return ActorLLM(actors, identity, per_call=per_call)


def start_llm_pool(settings: Settings, open_llm: LLMFactory) -> list[ActorHandle]:
    """Starts ``settings.batch.llm_actors`` LLM actors (``auto``: by the cluster's cores; not waiting for
    them to be ready)."""
    b = settings.batch
    count = b.llm_actor_count(settings.llm, cpus=cluster_cpus())
    actor = ray.remote(LLMActor).options(
        num_cpus=b.llm_actor_cpus, num_gpus=b.llm_actor_gpus, max_concurrency=b.llm_actor_concurrency,
        max_restarts=2, max_task_retries=1)
    return [cast(ActorHandle, actor.remote(settings, open_llm)) for _ in range(count)]


def cluster_cpus() -> int:
    """The CPU cores of the Ray cluster this process is connected to."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))
