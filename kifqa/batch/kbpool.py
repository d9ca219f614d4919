"""Where a job's knowledge base lives: a pool of KB actors that :class:`ActorKB` forwards to, or, for an
endpoint without a shared limit, each shard task's own process (:class:`TaskKB`, ``batch.kb_placement``).

A :class:`KBActor` holds one knowledge base (KIF stores and searches are not thread-safe: one per process,
used from one event loop) and answers from the shared on-disk cache when it can. The endpoint's
:class:`~kifqa.batch.limiter.EndpointLimiter` admits each HTTP request the knowledge base sends (its
``request_gate``), so that calls of many questions in flight at once can be coalesced into one request
(:mod:`kifqa.kb.coalesce`); a knowledge base without a gate is admitted per call. In a task the same class
serves the task's questions in process: the same cache and counters, no Ray call per lookup.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

import ray
from ray.actor import ActorHandle
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayError, RayTaskError

import kifqa.kb as kb_package
from kifqa.batch.clock import kb_call
from kifqa.batch.kbcache import KBCache
from kifqa.batch.limiter import EndpointLimiter, Lane, lane_limits
from kifqa.batch.llmpool import cluster_cpus
from kifqa.config import EndpointLimit, Settings
from kifqa.errors import ConfigError, KBError
from kifqa.kb.base import EntityProperties, FilterResult, KBStats, KnowledgeBase
from kifqa.kb.guard import retry_after
from kifqa.kb.spec import kb_routes
from kifqa.llm.routing import RESEND_BACKOFF_S, LeastLoaded
from kifqa.resilience import open_circuits
from kifqa.types import Candidate, Direction

#: Opens the knowledge base a spec names (:func:`kifqa.kb.spec.open_kb`).
KBFactory = Callable[[str, Settings], KnowledgeBase]

_logger = logging.getLogger(__name__)

_CALLS = frozenset({"search_entities", "search_properties", "properties_of", "facts", "labels", "named"})


class KBActor:
    """Holds one knowledge base and serves its calls (run as a Ray actor, :func:`start_kb_pool`, or in a
    shard task's process, :class:`TaskKB`)."""

    def __init__(self, settings: Settings, open_kb: KBFactory, limiter: ActorHandle | None) -> None:
        self._settings = settings.with_batch_outages()
        self._open_kb = open_kb
        self._kb: KnowledgeBase | None = None
        self._cache: KBCache | None = None
        self._cache_opened = not settings.batch.kb_cache
        self._gate: LimiterGate | None = None
        #: The gates of the other lanes the limiter keeps, by the knowledge base's attribute that takes them.
        self._lane_gates: dict[str, LimiterGate] = {}
        if limiter is not None:
            holder = ray.get_runtime_context().get_actor_id() or ""
            self._gate = LimiterGate(limiter, holder)
            lanes: list[str] = ray.get(limiter.lanes.remote())
            self._lane_gates = {f"{lane}_gate": LimiterGate(limiter, holder, lane=lane)
                                for lane in ("search", "scholarly") if lane in lanes}
            limiter.forget.remote(holder)  # slots a previous incarnation of this actor held
        self._stats = KBStats()
        self._per_call = False

    def _knowledge_base(self) -> KnowledgeBase:
        """The knowledge base, opened on first use: a failure to open it is that call's error."""
        if self._kb is None:
            self._kb = self._open_kb(self._settings.kb.spec, self._settings)
            if self._gate is not None:
                self._per_call = not hasattr(self._kb, "request_gate")
                if not self._per_call:
                    self._kb.request_gate = self._gate  # type: ignore[attr-defined]
                    for attribute, gate in self._lane_gates.items():
                        if hasattr(self._kb, attribute):
                            setattr(self._kb, attribute, gate)
        return self._kb

    def _results_cache(self) -> KBCache | None:
        """The shared cache of this knowledge base's results, opened on first use (it is keyed on the
        build the base reads); ``None`` when off or when it cannot be opened (logged)."""
        if not self._cache_opened:
            self._cache_opened = True
            try:
                self._cache = KBCache(self._settings.cache_dir / "kb-cache",
                                      _namespace(self._settings, self._knowledge_base()))
            except (OSError, sqlite3.Error) as err:
                _logger.warning("KB cache unavailable, answering without it: %s", err)
        return self._cache

    async def start(self) -> None:
        """Opens the knowledge base now."""
        self._knowledge_base()

    async def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name not in _CALLS:
            raise KBError(f"unknown knowledge-base call {name!r}")
        self._stats.calls += 1
        self._stats.by_kind[name] = self._stats.by_kind.get(name, 0) + 1
        cache = self._results_cache()
        if cache is None:
            return await self._limited(name, args, kwargs)
        value, hit = await cache.answer(name, args, kwargs, lambda: self._limited(name, args, kwargs))
        self._stats.cache_hits += hit
        return value

    async def _limited(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The call to the knowledge base; under its endpoint's shared limit as a whole when the
        knowledge base has no gate for its own requests."""
        method = getattr(self._knowledge_base(), name)
        if self._gate is None or not self._per_call:
            return await method(*args, **kwargs)
        await self._gate.acquire()
        started = time.monotonic()
        try:
            return await method(*args, **kwargs)
        except KBError as err:
            # The knowledge base retried, honouring Retry-After, and gave up: every actor waits.
            if wait := retry_after(err.__cause__):
                await self._gate.pause(wait)
            raise
        finally:
            await self._gate.release(time.monotonic() - started)

    async def open_circuits(self) -> dict[str, float]:
        """The endpoints this actor's process has found down (circuit open), and for how many seconds."""
        return open_circuits()

    async def cpu_seconds(self) -> float:
        """CPU seconds this actor's process has used (all its threads)."""
        return time.process_time()

    async def stats(self) -> KBStats:
        return self._stats

    async def aclose(self) -> None:
        if self._kb is not None:
            await self._kb.aclose()
        if self._cache:
            self._cache.close()


class LimiterGate:
    """The :class:`~kifqa.kb.guard.RequestGate` of one KB actor: the shared limiter, from any event loop
    (the knowledge base sends its requests from its own)."""

    def __init__(self, limiter: ActorHandle, holder: str, *, lane: Lane = "store") -> None:
        self._limiter = limiter
        self._holder = holder
        self._lane = lane

    async def acquire(self) -> None:
        await asyncio.wrap_future(self._limiter.acquire.remote(self._holder, self._lane).future())

    async def release(self, seconds: float) -> None:
        self._limiter.release.remote(self._holder, seconds, self._lane)

    async def pause(self, seconds: float) -> None:
        # Waited for, so that the limiter holds every actor before this request's slot is given back.
        await asyncio.wrap_future(self._limiter.pause.remote(seconds, self._lane).future())


def _namespace(settings: Settings, kb: KnowledgeBase) -> str:
    """What a knowledge base's answers depend on: its spec and settings (the mirrors of ``kb.endpoints`` and
    ``kb.wikidata_lookups``, whose two paths ask other services through other code, too), the build it reads (its
    hash, so rebuilt data is never served stale, wherever the data folder is) and the code that computes them
    (kifqa's KB layer and KIF), so that a code change never serves stale results either."""
    code = hashlib.sha256(version("kif-lib").encode())
    for path in sorted(Path(kb_package.__file__).parent.glob("*.py")):
        code.update(path.name.encode() + path.read_bytes())
    endpoints = {host: mirror.model_dump() for host, mirror in sorted(settings.kb.endpoints.items())}
    return json.dumps([settings.kb.spec, settings.kb.max_results, settings.kb.wikidata_lookups, kb.build,
                       code.hexdigest(), endpoints])


class _ForwardingKB(KnowledgeBase):
    """A :class:`KnowledgeBase` that hands each call, by name, to :meth:`_call`."""

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def _ask(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The call, the asking question's clock stopped while it is out (:mod:`kifqa.batch.clock`)."""
        with kb_call():
            return await self._call(name, *args, **kwargs)

    async def search_entities(self, text: str, *, limit: int = 10) -> list[Candidate]:
        return await self._ask("search_entities", text, limit=limit)

    async def search_properties(self, text: str, *, limit: int = 10) -> list[Candidate]:
        return await self._ask("search_properties", text, limit=limit)

    async def properties_of(self, entity: str) -> EntityProperties:
        return await self._ask("properties_of", entity)

    async def facts(self, entity: str, property: str, direction: Direction) -> FilterResult:
        return await self._ask("facts", entity, property, direction)

    async def labels(self, ids: list[str]) -> dict[str, str]:
        return await self._ask("labels", ids)

    async def named(self, texts: list[str]) -> list[str] | None:
        return await self._ask("named", texts)


class ActorKB(_ForwardingKB):
    """A :class:`KnowledgeBase` whose calls go to the least busy actor of a KB pool."""

    def __init__(self, actors: list[ActorHandle], spec: str) -> None:
        self.spec = spec
        self._pool = LeastLoaded(actors)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        # An actor lost with its node fails its calls until Ray has restarted it elsewhere: a lookup is a
        # read, so it is tried again, on the least busy actor then, for up to about half a minute.
        waits = iter(RESEND_BACKOFF_S)
        while True:
            with self._pool.pick() as actor:
                try:
                    return await actor.call.remote(name, args, kwargs)
                except RayTaskError as err:
                    raise (err.cause if isinstance(err.cause, Exception) else KBError(str(err))) from None
                except RayError as err:
                    lost = isinstance(err, (ActorUnavailableError, ActorDiedError))
                    wait_s = next(waits, None) if lost else None
                    if wait_s is None:
                        raise _actor_failed(err) from err
            await asyncio.sleep(wait_s)


def _actor_failed(err: RayError) -> KBError:
    first_line = str(err).partition("\n")[0]
    return KBError(f"KB actor failed: {type(err).__name__}: {first_line}")


class TaskKB(_ForwardingKB):
    """The knowledge base a shard task opens in its own process (``batch.kb_placement``): a
    :class:`KBActor` called directly, with its cache and counters, and no Ray call per lookup."""

    def __init__(self, settings: Settings, open_kb: KBFactory) -> None:
        self.spec = settings.kb.spec
        self._server = KBActor(settings, open_kb, None)

    async def start(self) -> None:
        """Opens the knowledge base now."""
        await self._server.start()

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return await self._server.call(name, args, kwargs)

    async def stats(self) -> KBStats:
        """The calls and cache hits it has served so far (a copy)."""
        return copy.deepcopy(await self._server.stats())

    async def aclose(self) -> None:
        await self._server.aclose()


def kb_in_tasks(placement: str, limit: EndpointLimit | None, *, spec: str) -> bool:
    """Whether a job's shard tasks open the knowledge base ``spec`` themselves (``placement``:
    ``batch.kb_placement``), given the ``limit`` of its endpoint (:func:`~kifqa.batch.limiter.endpoint_limit`);
    a :class:`ConfigError` for ``tasks`` on an endpoint with a limit, which only an actor pool can share."""
    if placement == "tasks" and limit is not None:
        raise ConfigError(f"batch.kb_placement: tasks cannot share the endpoint limit of {spec!r} "
                          "between tasks; use actors (or auto)")
    return placement == "tasks" or (placement == "auto" and limit is None)


@dataclass(frozen=True)
class KBPool:
    """Where a job's knowledge base lives, started (:func:`open_kb_pool`): the KB actors, the limiter of the
    endpoint that they share, and the proxy that forwards to them; no actors and no proxy where the shard tasks
    open the knowledge base themselves."""

    actors: list[ActorHandle]
    limiter: ActorHandle | None
    proxy: ActorKB | None


def open_kb_pool(settings: Settings, open_kb: KBFactory) -> KBPool:
    """Places the job's knowledge base (:func:`kb_in_tasks`, by the KB spec's routes): KB actors opening it with
    ``open_kb`` (not waiting for them), under the limiter of its endpoint where ``batch.limits`` names its host;
    or nothing to start, where the shard tasks open it."""
    routes = kb_routes(settings)
    limit, search, scholarly = lane_limits(settings.batch, routes)
    if kb_in_tasks(settings.batch.kb_placement, limit, spec=routes.spec):
        return KBPool([], None, None)
    limiter = None
    if limit:
        limiter = EndpointLimiter.remote(  # type: ignore[attr-defined]  # mypy ignores the @ray.remote decorator
            limit, search, scholarly=scholarly)
    actors = start_kb_pool(settings, open_kb, limiter)
    return KBPool(actors, limiter, ActorKB(actors, settings.kb.spec))


def start_kb_pool(settings: Settings, open_kb: KBFactory, limiter: ActorHandle | None) -> list[ActorHandle]:
    """Starts ``settings.batch.kb_actors`` KB actors (``auto``: by the cluster's cores; not waiting for them
    to be ready)."""
    b = settings.batch
    actor = ray.remote(KBActor).options(
        num_cpus=0, max_concurrency=b.kb_actor_concurrency, max_restarts=3, max_task_retries=2,
        scheduling_strategy="SPREAD")  # a lost node takes one of them, not all (they need no CPU: else all on one)
    return [cast(ActorHandle, actor.remote(settings, open_kb, limiter))
            for _ in range(b.kb_actor_count(cpus=cluster_cpus()))]
