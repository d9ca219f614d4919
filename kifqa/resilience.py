"""Retries, ``Retry-After`` holds and a circuit breaker for one remote endpoint (a SPARQL server, a
model server), shared by the KB layer (:class:`~kifqa.kb.guard.Guard`) and the ``openai`` backend;
tenacity runs the retry loop, this module decides what is retried, how often and when.

Each attempt's failure is sorted into a :class:`Failure` kind by the caller (:func:`http_failure` for
every httpx error, in one place for all of kifqa's HTTP clients); :class:`Endpoint` then decides, by
kind, whether to try again and when:

* ``throttled`` (HTTP 429): wait the ``Retry-After`` (capped), during which *no* attempt of this
  endpoint starts, or back off; does not count against the circuit;
* ``unavailable`` (5xx), ``connection`` (refused, reset, cut), ``timeout``, ``malformed`` (a 200
  whose body is not what the protocol promises): back off with full jitter and retry; each counts
  against the circuit;
* ``truncated`` (an endpoint cut the answer at its row limit): retried ``truncated_retries`` times
  (a server shedding load may answer fully the next time; a fixed row limit will not), never taken
  as a complete answer; does not count against the circuit;
* anything the caller does not classify: raised at once (a bad query, a 4xx).

The circuit opens after ``breaker_failures`` consecutive counted failures: for ``breaker_cooldown_s``
no request is sent and every call fails at once; then one probe goes through (half-open) and its
outcome closes or reopens it. A dead endpoint therefore costs each call a few milliseconds instead of
its whole retry budget, and the endpoint is not hammered while it recovers.

With ``max_outage_s`` (batch jobs) an open circuit makes calls wait instead: they wait for the probe,
and a failed attempt while the circuit is open does not use up their retries, so an outage shorter
than ``max_outage_s`` only delays them. Nor do a call's failures use up its retries while the
endpoint has answered nothing since the first of them: those may be the start of an outage whose
circuit has not opened yet (each further failure brings it nearer). Once the circuit has been open
longer than ``max_outage_s``, calls fail at once with a message that says so, and a job ends quickly
with every question's error stating it.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from kifqa.redact import redact

T = TypeVar("T")

FailureKind = Literal["throttled", "unavailable", "connection", "timeout", "malformed", "truncated"]

#: Failure kinds that say the endpoint is unhealthy (they count against the circuit).
UNHEALTHY: frozenset[str] = frozenset({"unavailable", "connection", "timeout", "malformed"})


@dataclass(frozen=True)
class Failure:
    """What went wrong in one attempt, as far as retrying is concerned."""

    kind: FailureKind
    message: str
    #: The delay the server asked for (``Retry-After``), in seconds.
    retry_after: float | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """How calls to one endpoint are retried and when its circuit opens (see the module doc)."""

    #: Further attempts after a throttled, unavailable, connection, timeout or malformed failure.
    retries: int = 3
    #: Further attempts after a truncated result.
    truncated_retries: int = 1
    #: Limit on one attempt, in seconds.
    timeout_s: float = 30.0
    #: First backoff step: the n-th retry waits a random time in [0, min(max_backoff_s, backoff_s * 2**(n-1))].
    backoff_s: float = 0.5
    max_backoff_s: float = 10.0
    #: Longest ``Retry-After`` obeyed; longer ones are cut to this.
    max_retry_after_s: float = 60.0
    #: Consecutive unhealthy failures that open the circuit (0: no circuit breaker).
    breaker_failures: int = 10
    #: Seconds the open circuit sends nothing before one probe is let through.
    breaker_cooldown_s: float = 30.0
    #: Batch semantics: while the circuit is open, calls wait for it to close (and keep retrying)
    #: instead of failing at once, until the circuit has been open this many seconds in a row;
    #: then they fail at once, saying so. 0: fail at once (interactive use).
    max_outage_s: float = 0.0


class GaveUp(Exception):
    """A call failed for good after ``attempts`` attempts (when the circuit was open, perhaps none);
    ``__cause__`` is the last attempt's exception, if one was made."""

    def __init__(self, message: str, failure: Failure, attempts: int) -> None:
        super().__init__(message)
        self.failure = failure
        self.attempts = attempts


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (a delay in seconds or an HTTP date, at least 0);
    ``None`` when it is absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


#: Statuses a later attempt may get past besides 429 and 5xx (OpenAI's clients retry them too).
_TRANSIENT_STATUSES = frozenset({408, 409, 425})


def status_failure(code: int) -> FailureKind | None:
    """The failure kind of an HTTP status: ``throttled`` for 429, ``unavailable`` for 5xx and the other
    transient statuses, ``None`` (not retried) for the rest."""
    if code == 429:
        return "throttled"
    return "unavailable" if code >= 500 or code in _TRANSIENT_STATUSES else None


def http_failure(err: BaseException, *, timed_out: str = "timed out") -> Failure | None:
    """The retryable failure an httpx error (or a timeout) is, described in one line; ``None`` when
    retrying cannot help. ``timed_out`` is the message of a timeout."""
    if isinstance(err, httpx.HTTPStatusError):
        kind = status_failure(err.response.status_code)
        retry_after = retry_after_seconds(err.response.headers.get("Retry-After"))
        return Failure(kind, describe_http_error(err), retry_after) if kind else None
    if isinstance(err, (TimeoutError, httpx.TimeoutException)):
        return Failure("timeout", timed_out)
    if isinstance(err, httpx.TransportError):
        return Failure("connection", describe_http_error(err))
    return None


def describe_http_error(err: BaseException) -> str:
    """A one-line account of an httpx error: the status, URL and start of the body of an error status,
    else the error's type and message."""
    if isinstance(err, httpx.HTTPStatusError):
        body = " ".join(err.response.text.split())[:300]
        return redact(f"HTTP {err.response.status_code} from {err.request.url}: {body or '(empty body)'}")
    if isinstance(err, (TimeoutError, httpx.TimeoutException)):
        return "timed out"
    return redact(f"{type(err).__name__}: {err}") if str(err) else type(err).__name__


def connection_failure(err: BaseException) -> str:
    """Why a connection could not be made, in a few words (``connection refused``): the socket error
    under httpx's and httpcore's wrappers."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror.lower()
        cause = cause.__cause__ or cause.__context__
    return str(err) or type(err).__name__


#: The endpoints of this process, for :func:`open_circuits`.
_LIVE: weakref.WeakSet[Endpoint] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def open_circuits() -> dict[str, float]:
    """The endpoints of this process whose circuit is open, by label, with the seconds each has been
    down (the longest of those that share a label)."""
    with _LIVE_LOCK:
        endpoints = list(_LIVE)
    down: dict[str, float] = {}
    for endpoint in endpoints:
        if (seconds := endpoint.down_s()) is not None:
            down[endpoint.label] = max(seconds, down.get(endpoint.label, 0.0))
    return down


class _Retry(Exception):
    """An attempt failed in a retryable way (its :class:`Failure` is recorded; the cause is chained)."""


class Endpoint:
    """One endpoint as this process sees it: the retry policy, ``Retry-After`` holds and the circuit.

    Safe to share between event loops and threads (its state is guarded by a lock and it awaits
    nothing loop-bound).
    """

    def __init__(self, name: str, policy: RetryPolicy, *, label: str | None = None) -> None:
        """``name`` starts its error messages; ``label`` (default ``name``) names it in
        :func:`open_circuits`; both with any credentials of a URL in them masked."""
        self.name = redact(name)
        self.label = redact(label or name)
        self.policy = policy
        self.retries = 0
        self._lock = threading.Lock()
        self._hold_until = 0.0
        self._failures = 0
        self._open_until = 0.0
        self._probing = False
        self._last = ""
        #: When the circuit opened, in this run of consecutive failures (0: it is closed).
        self._outage_since = 0.0
        #: Attempts the endpoint has answered (a call's failures since then may be an outage's start).
        self._answered = 0
        with _LIVE_LOCK:
            _LIVE.add(self)

    def down_s(self) -> float | None:
        """Seconds since the circuit opened, while this run of failures lasts; ``None`` when it is closed."""
        with self._lock:
            return time.monotonic() - self._outage_since if self._outage_since else None

    async def run(self, attempt: Callable[[], Awaitable[T]], classify: Callable[[BaseException], Failure | None],
                  *, slot: Callable[[], AbstractAsyncContextManager[object]] | None = None) -> T:
        """``await attempt()`` under the policy (tenacity drives the retries). ``classify`` sorts an
        attempt's exception into a :class:`Failure` (``None``: not retryable, raised as is); ``slot``
        bounds the attempts in flight (it is held only while a request is out). Raises :class:`GaveUp`
        when retrying ends."""
        failures: list[Failure] = []
        causes: list[BaseException] = []
        answered_before = 0  # the endpoint's answers when this call first failed

        async def once() -> T:
            async with (slot() if slot else nullcontext()):
                await self._wait_hold()
                while (refused := self._enter()) is not None:
                    message, wait = refused
                    if wait is None:
                        raise GaveUp(message, Failure("unavailable", message), len(failures)) from (
                            causes[-1] if causes else None)
                    await asyncio.sleep(wait)
                try:
                    async with asyncio.timeout(self.policy.timeout_s):
                        result = await attempt()
                except Exception as err:
                    if (failure := classify(err)) is None:
                        self._alive()
                        raise
                    nonlocal answered_before
                    answered_before = answered_before if failures else self._answered
                    self._failed(failure)
                    failures.append(failure)
                    causes.append(err)
                    raise _Retry() from err
                except BaseException:  # cancelled: a probe in flight must not keep the circuit shut
                    self._abandon()
                    raise
                self._alive()
                return result

        def same_kind() -> int:
            """Failed attempts so far of the last one's budget (truncations have their own)."""
            truncated = failures[-1].kind == "truncated"
            return sum((f.kind == "truncated") == truncated for f in failures)

        def exhausted(state: RetryCallState) -> bool:
            p = self.policy
            if failures[-1].kind in UNHEALTHY and self._outage_waits(answered_before):
                return False
            if failures[-1].kind == "throttled" and p.max_outage_s:
                return False  # batch jobs wait out throttling, within the question's timeout
            return same_kind() > (p.truncated_retries if failures[-1].kind == "truncated" else p.retries)

        def count(state: RetryCallState) -> None:
            self.retries += 1

        try:
            async for attempt_ in AsyncRetrying(retry=retry_if_exception_type(_Retry), stop=exhausted,
                                                wait=lambda _: self._delay(failures[-1], same_kind()),
                                                before_sleep=count, reraise=True):
                with attempt_:
                    return await once()
        except _Retry:
            raise GaveUp(failures[-1].message, failures[-1], len(failures)) from causes[-1]
        raise AssertionError("unreachable")

    # -- waits -----------------------------------------------------------------

    async def _wait_hold(self) -> None:
        """Waits out the ``Retry-After`` holds (set by :meth:`_failed`)."""
        while (wait := self._hold_until - time.monotonic()) > 0:
            await asyncio.sleep(wait)

    def _delay(self, failure: Failure, tries: int) -> float:
        p = self.policy
        if failure.retry_after is not None:
            return 0.0  # the hold already makes every attempt wait
        return random.uniform(0, min(p.max_backoff_s, p.backoff_s * 2 ** (tries - 1)))

    # -- the circuit -----------------------------------------------------------

    def _enter(self) -> tuple[str, float | None] | None:
        """Lets an attempt through (``None``), or says why not when the circuit is open, with the
        seconds to wait before asking again (``None``: fail now, the outage is too long to wait out)."""
        with self._lock:
            if not self._open_until:
                return None
            now = time.monotonic()
            left = self._open_until - now
            if left <= 0 and not self._probing:
                self._probing = True  # this attempt is the half-open probe
                return None
            limit = self.policy.max_outage_s
            waits = bool(limit) and now - self._outage_since < limit
            outage = "" if waits or not limit else (
                f"; down for {now - self._outage_since:.0f} s, longer than the {limit:g} s an outage "
                "may last (rerun to retry)")
            message = (f"{self.name} unavailable: circuit open after {self._failures} consecutive failures "
                       f"(next probe in {max(left, 0):.0f} s){outage}; last error: {self._last}")
            return message, min(max(left, 0.05), 1.0) if waits else None

    def _outage_waits(self, answered_before: int) -> bool:
        """Whether a call whose first failure came after ``answered_before`` answers waits on: in batch
        mode, while the circuit has been open less than ``max_outage_s``, or while the endpoint has
        answered nothing since that failure (the circuit may be about to open)."""
        limit = self.policy.max_outage_s
        with self._lock:
            if not limit:
                return False
            if self._outage_since:
                return time.monotonic() - self._outage_since < limit
            return bool(self.policy.breaker_failures) and self._answered == answered_before

    def _alive(self) -> None:
        with self._lock:
            self._failures, self._open_until, self._probing, self._outage_since = 0, 0.0, False, 0.0
            self._answered += 1

    def _abandon(self) -> None:
        with self._lock:
            self._probing = False

    def _failed(self, failure: Failure) -> None:
        p = self.policy
        with self._lock:
            if failure.retry_after is not None:
                self._hold_until = max(self._hold_until,
                                       time.monotonic() + min(failure.retry_after, p.max_retry_after_s))
            if failure.kind not in UNHEALTHY:
                self._probing = False
                return
            self._failures += 1
            self._last = failure.message
            if p.breaker_failures and (self._probing or self._failures >= p.breaker_failures):
                self._open_until = time.monotonic() + p.breaker_cooldown_s
                self._outage_since = self._outage_since or time.monotonic()
            self._probing = False
