"""What KIF 0.13 lacks around each KB call: retries by kind of failure with backoff (honouring
``Retry-After``), a circuit breaker, a concurrency cap, a timeout, call counters, and one error type
(:class:`KBError`) with a readable message. The policy itself is :class:`kifqa.resilience.Endpoint`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Protocol, TypeVar

import httpx

from kifqa.config import KBSettings
from kifqa.errors import KBError, KifqaError
from kifqa.kb.base import KBStats
from kifqa.kb.http import ResultError
from kifqa.kb.services import MaxlagError
from kifqa.resilience import (
    Endpoint,
    Failure,
    GaveUp,
    RetryPolicy,
    describe_http_error,
    http_failure,
    retry_after_seconds,
)

T = TypeVar("T")

#: Longest wait a ``Retry-After`` header may impose, in seconds.
MAX_RETRY_AFTER_S = 60.0


def classify(err: BaseException) -> Failure | None:
    """The retryable failure ``err`` is (see :mod:`kifqa.resilience`), or ``None`` if retrying cannot help."""
    if isinstance(err, ResultError):
        return Failure(err.kind, str(err))
    if isinstance(err, MaxlagError):
        return Failure("throttled", str(err), err.retry_after_s)
    return http_failure(err)


def retry_after(err: BaseException | None) -> float | None:
    """The delay a ``Retry-After`` header of ``err``'s response, or a ``maxlag`` refusal, asks for (at most
    :data:`MAX_RETRY_AFTER_S`), if any."""
    if not isinstance(err, httpx.HTTPStatusError):
        return None
    if isinstance(err, MaxlagError):
        return min(err.retry_after_s, MAX_RETRY_AFTER_S)
    seconds = retry_after_seconds(err.response.headers.get("Retry-After"))
    return None if seconds is None else min(seconds, MAX_RETRY_AFTER_S)


def policy(settings: KBSettings) -> RetryPolicy:
    """The retry policy and circuit breaker of a knowledge base's endpoint."""
    return RetryPolicy(truncated_retries=settings.truncated_retries, timeout_s=settings.timeout_s,
                       max_retry_after_s=MAX_RETRY_AFTER_S, **settings.resilience.model_dump())


class RequestGate(Protocol):
    """A limit on the HTTP requests to an endpoint that other processes share (the batch job's limiter)."""

    async def acquire(self) -> None:
        """Waits until one more request may leave."""

    async def release(self, seconds: float) -> None:
        """The request admitted last by :meth:`acquire` ended after ``seconds``."""

    async def pause(self, seconds: float) -> None:
        """The endpoint answered ``Retry-After: seconds``: no request may leave for that long."""


class Guard:
    """Runs the KB calls of one knowledge base; create and use it on a single event loop."""

    def __init__(self, name: str, settings: KBSettings, stats: KBStats) -> None:
        self.name = name
        self.settings = settings
        self.stats = stats
        #: The store and the search may be different services (WDQS and the Wikidata API): each
        #: has its own circuit and ``Retry-After`` holds.
        self.endpoints = {target: Endpoint(target, policy(settings), label=f"{name} ({target})")
                          for target in ("store", "search")}
        #: The concurrency cap of each target (a search waiting its service's turn never holds back the store).
        self._semaphores = {target: asyncio.Semaphore(settings.max_concurrency) for target in ("store", "search")}
        #: Each attempt on a target waits for its gate (one attempt is one HTTP request to a SPARQL store, or
        #: the page requests of one search: KIF's searches here send them one at a time).
        self.gates: dict[str, RequestGate | None] = {"store": None, "search": None}

    @property
    def gate(self) -> RequestGate | None:
        """The store's gate."""
        return self.gates["store"]

    @gate.setter
    def gate(self, gate: RequestGate | None) -> None:
        self.gates["store"] = gate

    async def run(self, kind: str, call: Callable[[], Awaitable[T]], *, target: str = "store") -> T:
        """``await call()`` on ``target`` (``store`` or ``search``) with retries, the circuit breaker,
        the concurrency cap (on each attempt in flight) and the timeout; failures become :class:`KBError`."""
        self.stats.calls += 1
        self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1
        started = time.perf_counter()
        gate = self.gates[target]
        try:
            if gate is None:
                return await self.endpoints[target].run(call, classify, slot=lambda: self._semaphores[target])
            return await self.endpoints[target].run(self._paused_on_429(call, gate), classify,
                                                    slot=lambda: self._gated(target, gate))
        except GaveUp as err:
            tries = f" after {err.attempts} attempts" if err.attempts > 1 else ""
            raise KBError(f"{self.name}: {kind} failed{tries}: {err}") from err.__cause__
        except KifqaError:
            raise
        except Exception as err:
            raise KBError(f"{self.name}: {kind} failed: {describe_http_error(err)}") from err
        finally:
            self.stats.retries = sum(e.retries for e in self.endpoints.values())
            self.stats.seconds += time.perf_counter() - started

    @asynccontextmanager
    async def _gated(self, target: str, gate: RequestGate) -> AsyncIterator[None]:
        """The target's concurrency cap, then its gate, held while one request is out."""
        async with self._semaphores[target]:
            await gate.acquire()
            started = time.monotonic()
            try:
                yield
            finally:
                await gate.release(time.monotonic() - started)

    @staticmethod
    def _paused_on_429(call: Callable[[], Awaitable[T]], gate: RequestGate) -> Callable[[], Awaitable[T]]:
        """``call``, telling the gate of a 429's ``Retry-After`` (or a ``maxlag`` refusal's) before its slot is
        given back."""

        async def attempt() -> T:
            try:
                return await call()
            except httpx.HTTPStatusError as err:
                if err.response.status_code == 429 or isinstance(err, MaxlagError):
                    await gate.pause(retry_after(err) or 1.0)
                raise
        return attempt
