"""The actors of a job, started and stopped together: the LLM pool, the KB pool and the endpoint limiter.

:func:`actor_pools` starts them (models loaded) and stops them; :func:`~kifqa.batch.run_job` does so
itself unless it is handed running pools, which lets several jobs share loaded models. A job that starts its own
(:func:`started_pools`) sends its tasks at once: they open their pipeline while the models load, and answer once
:attr:`Pools.ready` resolves.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ray
from ray import ObjectRef
from ray.actor import ActorHandle
from ray.exceptions import RayTaskError
from ray.util.placement_group import PlacementGroup, remove_placement_group

from kifqa.batch.address import ray_address
from kifqa.batch.kbpool import ActorKB, KBFactory, TaskKB, kb_in_tasks, start_kb_pool
from kifqa.batch.limiter import EndpointLimiter, endpoint_limit, scholarly_limit, search_limit
from kifqa.batch.llmpool import ActorLLM, LLMFactory, cluster_cpus, engine_workers, llm_placement_groups, start_llm_pool
from kifqa.config import Settings
from kifqa.errors import ConfigError, KifqaError
from kifqa.kb.base import KBStats
from kifqa.llm.blockstate import BlockStats
from kifqa.redact import redact

#: The settings the actors are made from: a job may use running pools only if its own are the same.
_POOL_SETTINGS: dict[str, Any] = {
    "data_dir": True, "cache_dir": True, "kb": True, "llm": True,
    "batch": {"llm_actors", "llm_actor_cpus", "llm_actor_gpus", "llm_actor_concurrency", "kb_actors",
              "kb_actor_concurrency", "kb_placement", "limits", "kb_cache"},
}


@dataclass(frozen=True)
class Pools:
    """Running pools and the proxies (the pipeline's model and knowledge base) that forward to them."""

    settings: Settings
    llm: ActorLLM
    #: The KB actors' proxy; ``None`` where the shard tasks open the knowledge base (``batch.kb_placement``).
    kb: ActorKB | None
    #: How the tasks open it then (:func:`~kifqa.kb.spec.open_kb` or the caller's double).
    open_kb: KBFactory
    llm_actors: list[ActorHandle]
    kb_actors: list[ActorHandle]
    #: Resolve once every model is loaded and the knowledge base opens (an error says why one cannot).
    ready: tuple[ObjectRef[Any], ...]
    #: When the actors were started (``time.perf_counter()``).
    started_at: float

    def wait(self) -> float:
        """Waits until the pools are :attr:`ready`; the seconds since they were started. A model or knowledge
        base that cannot be opened raises its error, in one line."""
        try:
            ray.get(list(self.ready))
        except RayTaskError as err:
            raise err.cause if isinstance(err.cause, KifqaError) else err from None
        return time.perf_counter() - self.started_at

    def check(self, settings: Settings) -> None:
        """Raises :class:`ConfigError` unless a job on ``settings`` may use these pools."""
        if settings.model_dump(include=_POOL_SETTINGS) != self.settings.model_dump(include=_POOL_SETTINGS):
            raise ConfigError("the running actor pools were started with other KB, model or actor settings")

    def llm_busy_seconds(self) -> float:
        """Wall time the LLM actors had model calls in flight, summed over the actors."""
        return sum(ray.get([a.busy_seconds.remote() for a in self.llm_actors]))

    def blocks(self) -> BlockStats:
        """What restoring and computing few-shot block states cost the LLM actors so far."""
        return BlockStats.total(ray.get([a.blocks.remote() for a in self.llm_actors])) or BlockStats()

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds the LLM actors and the KB actors have used so far (their processes)."""
        return {kind: sum(ray.get([a.cpu_seconds.remote() for a in actors]))
                for kind, actors in (("llm_actors", self.llm_actors), ("kb_actors", self.kb_actors))}

    def open_circuits(self) -> dict[str, float]:
        """The endpoints an actor has found down (circuit open), and for how many seconds; what the
        actors do not tell within a second is left out."""
        asked: list[ObjectRef[dict[str, float]]] = [a.open_circuits.remote() for a in self.llm_actors + self.kb_actors]
        ready, _ = ray.wait(asked, num_returns=len(asked), timeout=1.0)
        down: dict[str, float] = {}
        for seen in ray.get(ready):
            for label, seconds in seen.items():
                down[label] = max(seconds, down.get(label, 0.0))
        return down

    def kb_stats(self) -> KBStats:
        """The KB actors' calls and cache hits so far."""
        total = KBStats()
        each: list[KBStats] = ray.get([a.stats.remote() for a in self.kb_actors])
        for stats in each:
            total.calls += stats.calls
            total.cache_hits += stats.cache_hits
        return total


@contextmanager
def actor_pools(settings: Settings, *, open_kb: KBFactory | None = None,
                open_llm: LLMFactory | None = None) -> Iterator[Pools]:
    """Starts the LLM and KB actors ``settings.batch`` asks for and waits until the models are loaded;
    stops them on exit. ``open_kb`` and ``open_llm`` replace :func:`~kifqa.kb.spec.open_kb` and
    :func:`~kifqa.llm.open_llm` (they must be picklable)."""
    with started_pools(settings, open_kb=open_kb, open_llm=open_llm) as pools:
        pools.wait()
        yield pools


@contextmanager
def started_pools(settings: Settings, *, open_kb: KBFactory | None = None,
                  open_llm: LLMFactory | None = None) -> Iterator[Pools]:
    """:func:`actor_pools` without the wait: the pools are :attr:`~Pools.ready` later."""
    connect(settings)
    start = time.perf_counter()
    open_kb = open_kb or _open_kb()
    in_tasks = kb_in_tasks(settings)
    limiter = None if in_tasks else _limiter(settings)
    kb_actors = [] if in_tasks else start_kb_pool(settings, open_kb, limiter)
    groups = (llm_placement_groups(settings, settings.batch.llm_actor_count(settings.llm, cpus=cluster_cpus()))
              if engine_workers(settings) > 1 else [])
    llm_actors = start_llm_pool(settings, open_llm or _open_llm(), groups=groups)
    try:
        # Where the tasks open the knowledge base, a task opens it once first: an error then says why at once.
        opened = [_open_in_task.remote(settings, open_kb)] if in_tasks else [a.start.remote() for a in kb_actors]
        loaded: list[ObjectRef[str]] = [a.warm.remote() for a in llm_actors]
        llm = ActorLLM(llm_actors, loaded[0], per_call=settings.llm.requests_per_call)
        yield Pools(settings=settings, llm=llm,
                    kb=None if in_tasks else ActorKB(kb_actors, settings.kb.spec), open_kb=open_kb,
                    llm_actors=llm_actors, kb_actors=kb_actors, ready=(*loaded, *opened), started_at=start)
    finally:
        _stop(llm_actors + kb_actors, [limiter] if limiter else [], groups)


def connect(settings: Settings) -> None:
    """Joins or starts a Ray cluster unless Ray is initialised (:func:`~kifqa.batch.address.ray_address`:
    :class:`ConfigError` where nothing answers at the address given). ``KIFQA_*`` variables reach the workers
    through the runtime env, which Ray's dashboard and job info show, unless they hold a secret
    (:func:`~kifqa.redact.redact` would mask them): the workers get the settings themselves, secrets included,
    as their task and actor arguments, and API keys as :func:`~kifqa.batch.llmpool.forwarded_secrets`."""
    if ray.is_initialized():
        return
    address = ray_address(settings)
    # Inside `ray job submit` the job's runtime env already reaches the workers; Ray refuses a
    # ray.init that sets one of its variables again.
    env = {k: v for k, v in os.environ.items()
           if k.startswith("KIFQA_") and k not in _job_env_vars() and redact(f"{k}={v}") == f"{k}={v}"}
    ray.init(address=address, runtime_env={"env_vars": env} if env else None,
             log_to_driver=False)


def _job_env_vars() -> set[str]:
    """The variables the runtime env of the submitted Ray job this driver runs in sets, if any."""
    job = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR") or "{}")
    return set((job.get("runtime_env") or {}).get("env_vars") or {})


def _limiter(settings: Settings) -> ActorHandle | None:
    """The shared limiter of the KB's endpoints, when the settings limit its store's."""
    limit = endpoint_limit(settings)
    if not limit:
        return None
    return EndpointLimiter.remote(  # type: ignore[attr-defined]  # mypy ignores the @ray.remote decorator
        limit, search_limit(settings), scholarly=scholarly_limit(settings))


@ray.remote(num_cpus=0)
def _open_in_task(settings: Settings, open_kb: KBFactory) -> None:
    """Opens and closes the knowledge base in a task: an error if it cannot be opened."""

    async def check() -> None:
        kb = TaskKB(settings, open_kb)
        try:
            await kb.start()
        finally:
            await kb.aclose()

    asyncio.run(check())


def _stop(pools: list[ActorHandle], others: list[ActorHandle], groups: list[PlacementGroup]) -> None:
    """Lets the pools' actors release their models and connections (a minute at most), then ends
    every actor and frees the GPUs of the engines' placement groups."""
    closing: list[ObjectRef[None]] = [a.aclose.remote() for a in pools]
    ray.wait(closing, num_returns=len(closing), timeout=60)
    for actor in pools + others:
        ray.kill(actor)
    for group in groups:
        remove_placement_group(group)


def _open_kb() -> KBFactory:
    from kifqa.kb.spec import open_kb

    return open_kb


def _open_llm() -> LLMFactory:
    from kifqa.llm import open_llm

    return open_llm
