"""The pool of LLM actors and :class:`ActorLLM`, the :class:`LLM` that forwards to it.

Each actor holds one model (a llama.cpp process on CPU, a vLLM engine on one GPU or, with tensor or
pipeline parallelism, on the GPUs of its placement group). Actors are async with a high
``max_concurrency``: the requests of many questions reach the backend together and the backend
batches them (llama.cpp's parallel slots, vLLM's continuous batching).

An actor whose engine died (:class:`~kifqa.llm.vllm_engine.EngineDead`) ends its process, so that
Ray restarts it (``batch.llm_actor_max_restarts``) with a fresh engine; :class:`ActorLLM` sends the
requests it held to another actor, avoids a failing actor until it serves again, and drops from its
routing an actor that Ray will not restart.

Secrets the backends read from the environment (the OpenAI-compatible API key, ``HF_TOKEN``) travel
from the driver to the LLM actors as constructor arguments, never in the runtime env (which the
dashboard and the job's info show; Ray's docs keep credentials out of it): a node that already has
them in its environment (a Kubernetes secret) needs nothing from the driver.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import cast

import ray
from pydantic import SecretStr
from ray import ObjectRef
from ray.actor import ActorHandle
from ray.exceptions import ActorDiedError, RayError, RayTaskError
from ray.util.placement_group import PlacementGroup, placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from kifqa.config import LLMSettings, Settings
from kifqa.errors import ConfigError
from kifqa.llm.aio import PerLoop
from kifqa.llm.base import LLM, ChatRequest, Completion
from kifqa.llm.blockstate import BlockStats
from kifqa.llm.routing import RESEND_BACKOFF_S, LeastLoaded
from kifqa.llm.vllm_engine import EngineDead
from kifqa.resilience import open_circuits

log = logging.getLogger(__name__)

#: Opens the model the settings name (:func:`kifqa.llm.open_llm`).
LLMFactory = Callable[[Settings], LLM]

#: The Hugging Face token variable (gated models), forwarded to vLLM actors.
HF_TOKEN = "HF_TOKEN"


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

    def __init__(self, settings: Settings, open_llm: LLMFactory, secrets: dict[str, SecretStr] | None = None) -> None:
        for name, value in (secrets or {}).items():  # this worker process serves this actor only
            os.environ[name] = value.get_secret_value()
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
        """Loads the model (backends load lazily, :meth:`LLM.aload`); returns its identity."""
        await self._model().aload()
        return self._model().identity

    async def agenerate(self, requests: list[ChatRequest]) -> list[Completion]:
        """The model's completions; a dead engine ends this actor's process (Ray restarts it)."""
        with self._busy:
            try:
                return await self._model().agenerate(requests)
            except EngineDead as err:
                # As Ray Data LLM's vLLM stage does: exiting the process (not ray.actor.exit_actor(), an
                # intended exit that Ray does not restart from) lets max_restarts bring up a fresh engine.
                log.error("LLM actor: %s; exiting so that Ray restarts it", err)
                logging.shutdown()
                os._exit(1)

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

    def __init__(self, actors: list[ActorHandle], identity: str | ObjectRef[str], *, per_call: int = 1) -> None:
        """``identity``: the model's, or the pending reply of an actor's :meth:`LLMActor.warm` that gives it (read
        on first use, so that the pool's tasks can start while the models load)."""
        self._identity = identity
        self.per_call = per_call
        self._pool = LeastLoaded(actors)
        # A shard task runs its questions on a loop of its own, and a worker keeps this object for the next task.
        self._waiting: PerLoop[list[_Pending]] = PerLoop(list)
        self._calls: set[asyncio.Task[None]] = set()

    @property
    def live_actors(self) -> list[ActorHandle]:
        """The actors this proxy still routes to: all but those found dead for good."""
        return self._pool.live

    @property
    def identity(self) -> str:  # type: ignore[override]  # read-only here: the actors' model names it
        if not isinstance(self._identity, str):
            self._identity = ray.get(self._identity)
        return self._identity

    def __reduce__(self) -> tuple[Callable[..., ActorLLM], tuple[list[ActorHandle], str | ObjectRef[str], int]]:
        return _actor_llm, (self._pool.members, self._identity, self.per_call)

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in requests]
        waiting = self._waiting.get()
        if futures and not waiting:
            loop.call_soon(self._send)  # after this turn's other callers have added theirs
        waiting += (_Pending(r, f) for r, f in zip(requests, futures))
        try:
            return [await f for f in futures]
        except asyncio.CancelledError:
            # The caller gave up (a question timeout): a call whose every request is given up is cancelled
            # in the actor too, so the backend stops them (a llama.cpp slot, an HTTP request).
            for f in futures:
                f.cancel()
            raise

    def _send(self, waiting: list[_Pending] | None = None) -> None:
        """Sends the waiting requests (or ``waiting``), up to :attr:`per_call` a call to each actor."""
        if waiting is None:
            waiting = self._waiting.pop() or []
        by_actor: dict[int, tuple[ActorHandle, ExitStack, list[_Pending]]] = {}
        for pending in waiting:
            if pending.future.done():
                continue  # its caller gave up
            pick = ExitStack()
            try:
                actor = pick.enter_context(self._pool.pick(pending.request.prefix_key))  # busy until the call ends
            except LookupError:
                pending.future.set_result(Completion(error=ALL_DEAD))
                continue
            _, picks, batch = by_actor.get(id(actor)) or (actor, ExitStack(), [])
            if len(batch) == self.per_call:
                self._start(actor, batch, picks)
                picks, batch = ExitStack(), []
            by_actor[id(actor)] = (actor, picks, batch)
            picks.enter_context(pick)
            batch.append(pending)
        for actor, picks, batch in by_actor.values():
            self._start(actor, batch, picks)

    def _start(self, actor: ActorHandle, batch: list[_Pending], picks: ExitStack) -> None:
        task = asyncio.get_running_loop().create_task(self._call(actor, batch, picks))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _call(self, actor: ActorHandle, batch: list[_Pending], picks: ExitStack) -> None:
        """One call to ``actor``; when the actor fails (its process died, or it cannot be reached), its
        requests go to another actor after the waits of :data:`~kifqa.llm.routing.RESEND_BACKOFF_S` (its node
        may be lost while Ray restarts it), once per wait. A failed call, or one whose every
        answer is an error, makes the routing avoid the actor for a while."""
        with picks:
            call: ObjectRef[list[Completion]] = actor.agenerate.remote([p.request for p in batch])
            futures = [p.future for p in batch]

            def given_up(_: asyncio.Future[Completion]) -> None:
                if all(f.cancelled() for f in futures):
                    ray.cancel(call)

            for future in futures:
                future.add_done_callback(given_up)
            resent: list[_Pending] = []
            try:
                completions = await call
            except RayError as err:
                self._pool.failed(actor)
                if isinstance(err, ActorDiedError) and await asyncio.to_thread(_dead_for_good, actor):
                    log.error("an LLM actor died and Ray will not restart it (batch.llm_actor_max_restarts): "
                              "it leaves the routing; %d left", len(self._pool.live) - 1)
                    self._pool.remove(actor)
                first_line = str(err).partition("\n")[0]
                completions = [Completion(error=f"LLM actor failed: {type(err).__name__}: {first_line}")] * len(batch)
                if not isinstance(err, RayTaskError):  # the actor died or cannot be reached, not the call
                    resent = [p for p in batch if p.resends < len(RESEND_BACKOFF_S) and not p.future.done()]
            else:
                if any(c.ok for c in completions) or not completions:
                    self._pool.succeeded(actor)
                else:  # an actor whose every answer is an error fails fast: it must not look idle
                    self._pool.failed(actor)
        for pending, completion in zip(batch, completions, strict=True):
            if pending not in resent and not pending.future.done():
                pending.future.set_result(completion)
        if resent:
            log.warning("an LLM actor failed; sending its %d request(s) to another actor", len(resent))
            await asyncio.sleep(RESEND_BACKOFF_S[max(p.resends for p in resent)])
            self._send([_Pending(p.request, p.future, p.resends + 1) for p in resent])


#: A model call's error once every LLM actor is dead for good.
ALL_DEAD = ("every LLM actor died and Ray restarts them no more (batch.llm_actor_max_restarts): see the actors' "
            "logs for why their engines died, then rerun the job (finished shards are kept)")


def _dead_for_good(actor: ActorHandle) -> bool:
    """Whether Ray holds ``actor`` dead (its restarts spent), not restarting (the GCS's actor table)."""
    from ray._private import state  # the one query of an actor's state that needs no dashboard

    info = state.actors(actor_id=actor._actor_id.hex())
    return bool(info) and info.get("State") == "DEAD"


@dataclass(eq=False)
class _Pending:
    """A request waiting for its completion, and how many times it was sent again."""

    request: ChatRequest
    future: asyncio.Future[Completion]
    resends: int = 0


def _actor_llm(actors: list[ActorHandle], identity: str | ObjectRef[str], per_call: int) -> ActorLLM:
    return ActorLLM(actors, identity, per_call=per_call)


@dataclass(frozen=True)
class LLMPool:
    """The LLM actors :func:`start_llm_pool` started, and the placement groups of their engines (none where an
    engine is one worker): removed once the actors end, they free the GPUs."""

    actors: list[ActorHandle]
    groups: list[PlacementGroup]


def start_llm_pool(settings: Settings, open_llm: LLMFactory) -> LLMPool:
    """Starts ``settings.batch.llm_actors`` LLM actors (``auto``: by the cluster's cores; not waiting for
    them to be ready). An engine of several GPU workers (:func:`engine_workers`) runs in a placement group
    of its own (:func:`llm_placement_groups`)."""
    b = settings.batch
    secrets = forwarded_secrets(settings)
    workers = engine_workers(settings.llm)
    count = b.llm_actor_count(settings.llm, cpus=cluster_cpus())
    # A dead engine exits its actor's process: Ray restarts the actor, and ActorLLM (not Ray) sends the
    # requests it held to another actor, so that they do not wait for the new engine to load.
    options = dict(num_cpus=b.llm_actor_cpus, num_gpus=b.llm_actor_gpus, max_concurrency=b.llm_actor_concurrency,
                   max_restarts=b.llm_actor_max_restarts, max_task_retries=0)
    if workers == 1:
        actor = ray.remote(LLMActor).options(**options)
        return LLMPool([cast(ActorHandle, actor.remote(settings, open_llm, secrets)) for _ in range(count)], [])
    groups = llm_placement_groups(settings, count)
    return LLMPool([cast(ActorHandle, ray.remote(LLMActor).options(
        **{**options, "num_gpus": 0},  # the GPUs are the bundles', for vLLM's workers
        scheduling_strategy=PlacementGroupSchedulingStrategy(
            group, placement_group_bundle_index=0, placement_group_capture_child_tasks=True),
    ).remote(settings, open_llm, secrets)) for group in groups], groups)


def engine_workers(llm: LLMSettings) -> int:
    """GPU workers per engine: ``tensor_parallel_size`` × ``pipeline_parallel_size`` of the vLLM
    engine options (``llm.extra``); 1 for the other backends."""
    if llm.backend != "vllm":
        return 1
    sizes = [llm.extra.get(name, 1) for name in ("tensor_parallel_size", "pipeline_parallel_size")]
    if not all(isinstance(n, int) and n >= 1 for n in sizes):
        raise ConfigError(f"llm.extra.tensor_parallel_size and pipeline_parallel_size must be whole numbers >= 1, "
                          f"not {sizes[0]!r} and {sizes[1]!r}")
    return sizes[0] * sizes[1]


def llm_placement_groups(settings: Settings, count: int) -> list[PlacementGroup]:
    """One placement group per LLM actor whose engine has several GPU workers, as Ray Data LLM places
    vLLM: a bundle per worker (``batch.llm_actor_gpus`` GPUs, at least 1), the first one also holding
    the actor's CPUs. Tensor-parallel workers exchange activations every layer, so with pipeline
    parallelism off the bundles must share a node (``STRICT_PACK``); pipeline stages may span nodes
    (``PACK``)."""
    b = settings.batch
    workers = engine_workers(settings.llm)
    gpus = b.llm_actor_gpus or 1.0
    first = {"GPU": gpus, **({"CPU": b.llm_actor_cpus} if b.llm_actor_cpus else {})}
    strategy = "STRICT_PACK" if settings.llm.extra.get("pipeline_parallel_size", 1) == 1 else "PACK"
    return [placement_group([first] + [{"GPU": gpus}] * (workers - 1), strategy=strategy) for _ in range(count)]


def forwarded_secrets(settings: Settings) -> dict[str, SecretStr]:
    """The secrets in this process's environment that the LLM actors' backend reads: the API key
    (``llm.api_key_env``) of the ``openai`` backend, ``HF_TOKEN`` for ``vllm`` (gated models)."""
    names = {"openai": [settings.llm.api_key_env], "vllm": [HF_TOKEN]}.get(settings.llm.backend, [])
    return {name: SecretStr(os.environ[name]) for name in names if os.environ.get(name)}


def cluster_cpus() -> int:
    """The CPU cores of the Ray cluster this process is connected to."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))
