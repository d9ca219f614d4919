""":class:`Coalescer`: concurrent lookups of one kind, gathered into batches and answered per caller.

A lookup joins the open batch of its group (e.g. forward ``properties_of``). A batch starts when it
holds ``size`` lookups, or ``wait_s`` after its first one when fewer than ``max_running`` batches of
its group are running; otherwise it keeps gathering until one of them ends. So batches stay small
when the endpoint answers at once and grow while it is slow or the caller's limits hold requests
back. A batch whose run raises is run again one lookup at a time, so an exception costs only the
lookup that caused it. Create and use it on one event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

G = TypeVar("G", bound=Hashable)
A = TypeVar("A")
R = TypeVar("R")

#: Runs one batch: the results (or exceptions) of ``group``'s lookups ``args``, in order.
BatchRunner = Callable[[G, list[A]], Awaitable[list[R | BaseException]]]


@dataclass
class _Group(Generic[A, R]):
    pending: list[tuple[A, asyncio.Future[R]]] = field(default_factory=list)
    running: int = 0
    timer: asyncio.TimerHandle | None = None
    due: bool = False


class Coalescer(Generic[G, A, R]):
    """Gathers lookups by group into batches that ``run`` answers (see the module doc)."""

    def __init__(self, run: BatchRunner[G, A, R], *, size: int, wait_s: float, max_running: int = 1) -> None:
        self._run = run
        self.size = size
        self.wait_s = wait_s
        self.max_running = max_running
        self._groups: dict[G, _Group[A, R]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: Batches run and lookups they answered.
        self.batches = 0
        self.lookups = 0

    async def lookup(self, group: G, arg: A) -> R:
        """The result of lookup ``arg`` of ``group``, answered within a batch."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        g = self._groups.setdefault(group, _Group())
        g.pending.append((arg, future))
        if len(g.pending) >= self.size:
            self._start(group, g)
        elif g.timer is None and not g.due:
            g.timer = loop.call_later(self.wait_s, self._due, group, g)
        return await future

    def _due(self, group: G, g: _Group[A, R]) -> None:
        g.timer, g.due = None, True
        if g.running < self.max_running:
            self._start(group, g)

    def _start(self, group: G, g: _Group[A, R]) -> None:
        batch, g.pending = g.pending[:self.size], g.pending[self.size:]
        if g.timer is not None:
            g.timer.cancel()
        g.timer, g.due = None, bool(g.pending)
        g.running += 1
        task = asyncio.get_running_loop().create_task(self._answer(group, g, batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, group: G, g: _Group[A, R], batch: list[tuple[A, asyncio.Future[R]]]) -> None:
        self.batches += 1
        self.lookups += len(batch)
        try:
            results: list[R | BaseException] = await self._apart(group, [arg for arg, _ in batch])
        except BaseException as err:  # noqa: BLE001 - cancelled: each caller gets the batch's error
            results = [err] * len(batch)
        finally:
            g.running -= 1
            if g.pending and (g.due or len(g.pending) >= self.size):
                self._start(group, g)
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():
                continue  # its caller gave up
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def _apart(self, group: G, args: list[A]) -> list[R | BaseException]:
        """The results of ``run`` on ``args``; if it raises, of ``run`` on each arg alone (each keeps its
        own error)."""
        try:
            return await self._run(group, args)
        except Exception as err:
            if len(args) == 1:
                return [err]
        return list(await asyncio.gather(*(self._one(group, arg) for arg in args)))

    async def _one(self, group: G, arg: A) -> R | BaseException:
        try:
            [result] = await self._run(group, [arg])
        except Exception as err:
            return err
        return result
