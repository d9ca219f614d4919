"""What KIF 0.13 lacks around each KB call: retries with backoff (honouring ``Retry-After``), a
concurrency cap, a timeout, call counters, and one error type (:class:`KBError`) with a readable message.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from kifqa.config import KBSettings
from kifqa.errors import KBError, KifqaError
from kifqa.kb.base import KBStats

T = TypeVar("T")

#: Longest wait a ``Retry-After`` header may impose, in seconds.
MAX_RETRY_AFTER_S = 60.0

_backoff = wait_exponential_jitter(multiplier=0.5, max=10.0)


def is_transient(err: BaseException) -> bool:
    """Whether retrying may help: transport errors, timeouts, HTTP 429 and 5xx."""
    if isinstance(err, httpx.HTTPStatusError):
        return err.response.status_code == 429 or err.response.status_code >= 500
    return isinstance(err, (httpx.TransportError, TimeoutError))


def retry_after(err: BaseException | None) -> float | None:
    """The delay a ``Retry-After`` header of ``err``'s response asks for, if any."""
    if not isinstance(err, httpx.HTTPStatusError) or not (value := err.response.headers.get("Retry-After")):
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _wait(state: RetryCallState) -> float:
    asked = retry_after(state.outcome.exception() if state.outcome else None)
    return asked if asked is not None else _backoff(state)


def describe(err: BaseException) -> str:
    """A one-line account of ``err``."""
    if isinstance(err, httpx.HTTPStatusError):
        body = " ".join(err.response.text.split())[:300]
        return f"HTTP {err.response.status_code} from {err.request.url}: {body or '(empty body)'}"
    if isinstance(err, TimeoutError):
        return "timed out"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


class Guard:
    """Runs the KB calls of one knowledge base; create and use it on a single event loop."""

    def __init__(self, name: str, settings: KBSettings, stats: KBStats) -> None:
        self.name = name
        self.settings = settings
        self.stats = stats
        self._semaphore = asyncio.Semaphore(settings.max_concurrency)

    async def run(self, kind: str, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()`` with retries, the concurrency cap and the timeout; failures become :class:`KBError`."""
        attempts = self.settings.retries + 1
        self.stats.calls += 1
        self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1
        async with self._semaphore:
            started = time.perf_counter()
            try:
                async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(attempts), wait=_wait, retry=retry_if_exception(is_transient),
                    before_sleep=self._count_retry, reraise=True,
                ):
                    with attempt:
                        async with asyncio.timeout(self.settings.timeout_s):
                            return await call()
            except KifqaError:
                raise
            except Exception as err:
                tries = f" after {attempts} attempts" if is_transient(err) and attempts > 1 else ""
                raise KBError(f"{self.name}: {kind} failed{tries}: {describe(err)}") from err
            finally:
                self.stats.seconds += time.perf_counter() - started
        raise AssertionError("unreachable")

    def _count_retry(self, state: RetryCallState) -> None:
        self.stats.retries += 1
