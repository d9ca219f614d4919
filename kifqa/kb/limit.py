"""One limit on the HTTP requests to one host: requests in flight, requests per second, a query-time budget, and
a pause for everyone when the host answers ``Retry-After`` (or the Wikidata API's ``maxlag``).

:class:`RequestLimit` is the limit itself, on one event loop; the batch job shares one between its KB actors
(:class:`kifqa.batch.limiter.EndpointLimiter`), and a knowledge base in one process holds its own
(:class:`LocalGate`).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from kifqa.config import EndpointLimit


class RequestLimit:
    """Admits requests to one host.

    Slots are counted per holder (a KB actor) so that a restarted holder can hand back what its
    previous incarnation held (:meth:`forget`). The query-time budget is an estimate: each request
    costs ``charge_s`` plus its time beyond the shortest request seen (that much is the round trip,
    not the endpoint's work); a request starts only while the estimate is within the budget.
    """

    def __init__(self, limit: EndpointLimit) -> None:
        #: The limit it keeps.
        self.limit = limit
        self._slots = asyncio.Semaphore(limit.max_concurrent)
        self._interval = 1.0 / limit.per_second if limit.per_second else 0.0
        self._next_start = 0.0
        self._paused_until = 0.0
        self._budget = limit.burst_s
        self._budget_at = time.monotonic()
        self._round_trip: float | None = None
        self._held: Counter[str] = Counter()
        self._pauses = 0

    async def acquire(self, holder: str) -> None:
        """Waits for a free slot and for the request's turn under the rate limit, the budget and any pause."""
        await self._slots.acquire()
        self._held[holder] += 1
        while True:
            while (wait := max(self._paused_until, self._budget_ready()) - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            now = time.monotonic()
            if now >= self._next_start:
                self._next_start = now + self._interval
                return
            await asyncio.sleep(self._next_start - now)  # then check the pause again

    def release(self, holder: str, seconds: float | None = None) -> None:
        """Gives back ``holder``'s slot of a request that took ``seconds`` (charged to the budget)."""
        if seconds is not None and self.limit.budget_s_per_s:
            self._round_trip = seconds if self._round_trip is None else min(self._round_trip, seconds)
            self._refill()
            self._budget -= self.limit.charge_s + seconds - self._round_trip
        if self._held[holder] > 0:
            self._held[holder] -= 1
            self._slots.release()

    def forget(self, holder: str) -> None:
        """Releases every slot ``holder`` still holds."""
        for _ in range(self._held.pop(holder, 0)):
            self._slots.release()

    def pause(self, seconds: float) -> None:
        """Starts no request for ``seconds`` (the host said ``Retry-After``)."""
        self._pauses += 1
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    @property
    def pauses(self) -> int:
        """How many times the host said ``Retry-After``."""
        return self._pauses

    def _refill(self) -> None:
        now = time.monotonic()
        rate = self.limit.budget_s_per_s or 0.0
        self._budget = min(self.limit.burst_s, self._budget + (now - self._budget_at) * rate)
        self._budget_at = now

    def _budget_ready(self) -> float:
        """When the budget is positive again (now, if it is or there is none)."""
        if not self.limit.budget_s_per_s:
            return 0.0
        self._refill()
        return self._budget_at + max(0.0, -self._budget) / self.limit.budget_s_per_s


class LocalGate:
    """A :class:`~kifqa.kb.guard.RequestGate` over a :class:`RequestLimit` of this process (use it on one event
    loop): the limit of ``batch.limits`` kept by a knowledge base that no other process shares."""

    def __init__(self, limit: EndpointLimit) -> None:
        self.requests = RequestLimit(limit)

    async def acquire(self) -> None:
        await self.requests.acquire("")

    async def release(self, seconds: float) -> None:
        self.requests.release("", seconds)

    async def pause(self, seconds: float) -> None:
        self.requests.pause(seconds)
