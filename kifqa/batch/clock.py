"""A question's own time: what ``batch.question_timeout_s`` counts.

Behind the public hosts' limits a knowledge-base call may wait long for its turn (a slot, the query-time
budget, a ``Retry-After``), and the more questions a job has in flight, the longer. That wait is not the
question's: its clock stops while any of its knowledge-base calls is out, so a question queued behind the limits
never times out for waiting. A knowledge-base call is bounded on its own (``kb.timeout_s`` a request, its retries,
``batch.max_outage_s``); the timeout bounds the rest (the model's calls, the pipeline's work).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

#: The clock of the question the current task answers (``None`` outside a timed question).
_CURRENT: contextvars.ContextVar[QuestionClock | None] = contextvars.ContextVar("kifqa_question_clock",
                                                                             default=None)


class QuestionClock:
    """Seconds since the question started, less those during which one of its knowledge-base calls was out."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._out = 0
        self._out_since = 0.0
        self._stopped_s = 0.0

    def own_s(self) -> float:
        now = time.monotonic()
        stopped = self._stopped_s + (now - self._out_since if self._out else 0.0)
        return now - self._started - stopped

    @contextmanager
    def stopped(self) -> Iterator[None]:
        """Stops the clock while the body runs (calls that overlap stop it once)."""
        if not self._out:
            self._out_since = time.monotonic()
        self._out += 1
        try:
            yield
        finally:
            self._out -= 1
            if not self._out:
                self._stopped_s += time.monotonic() - self._out_since


@contextmanager
def kb_call() -> Iterator[None]:
    """Stops the current question's clock, if any, while a knowledge-base call is out."""
    clock = _CURRENT.get()
    if clock is None:
        yield
        return
    with clock.stopped():
        yield


async def within(coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
    """``await coro`` on a clock of its own (:func:`kb_call` stops it); :class:`TimeoutError` (``coro``
    cancelled) once its own time passes ``timeout_s``."""
    clock = QuestionClock()
    token = _CURRENT.set(clock)
    try:
        task = asyncio.ensure_future(coro)  # the task's context is a copy of this one: it holds the clock
    finally:
        _CURRENT.reset(token)
    try:
        while (left := timeout_s - clock.own_s()) > 0:
            done, _ = await asyncio.wait({task}, timeout=left)
            if done:
                return task.result()
    except BaseException:
        task.cancel()
        raise
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    raise TimeoutError(f"no answer after {timeout_s:g} s of its own time")
