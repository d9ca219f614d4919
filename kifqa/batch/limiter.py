"""One limit per endpoint, shared by every KB actor of a job: requests in flight, requests per second,
and a pause for everyone when the endpoint answers ``Retry-After``."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import ray

from kifqa.config import EndpointLimit, Settings
from kifqa.kb.spec import endpoint_host

#: Waiting acquirers hold a slot of the actor's concurrency each.
_MAX_WAITERS = 100_000


def endpoint_limit(settings: Settings) -> EndpointLimit | None:
    """The limit ``batch.limits`` sets on the endpoint the KB spec's store queries: its host as the spec
    resolves (:func:`kifqa.kb.spec.endpoint_host`), so ``kif:wdqs`` is limited like ``wikidata``."""
    host = endpoint_host(settings.kb.spec, settings)
    return settings.batch.limits.get(host) if host else None


@ray.remote(num_cpus=0, max_concurrency=_MAX_WAITERS, max_restarts=-1)  # type: ignore[call-overload]  # Ray's overloads omit max_concurrency
class EndpointLimiter:
    """Admits requests to one endpoint.

    Slots are counted per holder (a KB actor) so that a restarted holder can hand back what its
    previous incarnation held (:meth:`forget`).
    """

    def __init__(self, limit: EndpointLimit) -> None:
        self._slots = asyncio.Semaphore(limit.max_concurrent)
        self._interval = 1.0 / limit.per_second if limit.per_second else 0.0
        self._next_start = 0.0
        self._held: Counter[str] = Counter()

    async def acquire(self, holder: str) -> None:
        """Waits for a free slot and for the request's turn under the rate limit and any pause."""
        await self._slots.acquire()
        self._held[holder] += 1
        now = time.monotonic()
        start = max(now, self._next_start)
        self._next_start = start + self._interval
        if start > now:
            await asyncio.sleep(start - now)

    async def release(self, holder: str) -> None:
        if self._held[holder] > 0:
            self._held[holder] -= 1
            self._slots.release()

    async def forget(self, holder: str) -> None:
        """Releases every slot ``holder`` still holds."""
        for _ in range(self._held.pop(holder, 0)):
            self._slots.release()

    async def pause(self, seconds: float) -> None:
        """Starts no request for ``seconds`` (the endpoint said ``Retry-After``)."""
        self._next_start = max(self._next_start, time.monotonic() + seconds)
