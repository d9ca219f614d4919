"""Spreads calls over a pool (Ray actors, or in-process model instances): the one with the fewest calls
in flight from this process, or the one that serves the call's shared prompt prefix; never one that is
failing while another is not."""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")

#: Seconds a member is avoided after its first failure in a row; each further one doubles it.
AVOID_S = 1.0
#: The longest a failing member is avoided before it is tried again.
MAX_AVOID_S = 30.0
#: Seconds before a call whose Ray actor died or cannot be reached (its node lost, Ray restarting it) is sent
#: again, to the member the pool then picks; one resend per wait, about half a minute in all.
RESEND_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


class LeastLoaded(Generic[T]):
    """Picks among ``members`` the one with the fewest calls in flight; ties go round-robin.

    A call with an affinity key (a shared prompt prefix) goes to the member the key hashes to, the
    same one in every process, so that member's prefix cache serves the prefix; unless that member
    has more than ``spill`` calls in flight beyond the least loaded one, which then takes the call.

    A member the caller reports :meth:`failed` is avoided for :data:`AVOID_S` seconds, doubled for each
    further failure in a row up to :data:`MAX_AVOID_S`, until it :meth:`succeeded`: a member that fails
    fast has few calls in flight, and would otherwise look the least loaded. When every member is
    avoided, the one whose wait ends first is picked.
    """

    def __init__(self, members: list[T], *, spill: int = 2, clock: Callable[[], float] = time.monotonic) -> None:
        if not members:
            raise ValueError("a pool needs at least one member")
        self.members = members
        self.spill = spill
        self._clock = clock
        self._in_flight = [0] * len(members)
        self._failures = [0] * len(members)
        self._avoid_until = [0.0] * len(members)
        self._gone: set[int] = set()
        self._turn = itertools.count()

    @property
    def live(self) -> list[T]:
        """The members not removed (:meth:`remove`)."""
        return [m for i, m in enumerate(self.members) if i not in self._gone]

    @contextmanager
    def pick(self, affinity: str | None = None) -> Iterator[T]:
        """The chosen member, counted as busy until the block ends; :class:`LookupError` when every member
        is gone."""
        n = len(self.members)
        healthy = self._healthy()
        offset = next(self._turn)
        i = min((j for j in ((offset + k) % n for k in range(n)) if j in healthy),
                key=self._in_flight.__getitem__)
        if affinity is not None:
            home = int.from_bytes(hashlib.blake2b(affinity.encode(), digest_size=8).digest(), "big") % n
            if home in healthy and self._in_flight[home] <= self._in_flight[i] + self.spill:
                i = home
        self._in_flight[i] += 1
        try:
            yield self.members[i]
        finally:
            self._in_flight[i] -= 1

    def failed(self, member: T) -> None:
        """``member`` failed a call: avoid it for a while, longer with each failure in a row."""
        i = self._index(member)
        self._failures[i] += 1
        wait = min(AVOID_S * 2 ** (self._failures[i] - 1), MAX_AVOID_S)
        self._avoid_until[i] = self._clock() + wait

    def remove(self, member: T) -> None:
        """``member`` can never serve again: it is picked no more (affinity keys keep their other homes)."""
        self._gone.add(self._index(member))

    def succeeded(self, member: T) -> None:
        """``member`` served a call: it is healthy again."""
        i = self._index(member)
        self._failures[i] = 0
        self._avoid_until[i] = 0.0

    def avoided(self) -> list[T]:
        """The members avoided now."""
        now = self._clock()
        return [m for m, until in zip(self.members, self._avoid_until) if until > now]

    def _healthy(self) -> set[int]:
        """The indices of the members not avoided now; else the one whose wait ends first."""
        now = self._clock()
        live = [i for i in range(len(self.members)) if i not in self._gone]
        if not live:
            raise LookupError("every member of the pool is gone")
        healthy = {i for i in live if self._avoid_until[i] <= now}
        return healthy or {min(live, key=self._avoid_until.__getitem__)}

    def _index(self, member: T) -> int:
        return next(i for i, m in enumerate(self.members) if m is member)

    def __getstate__(self) -> dict[str, object]:
        # A copy (another task's proxy) starts with nothing in flight and nothing failed.
        return {"members": self.members, "spill": self.spill}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["members"], spill=state["spill"])  # type: ignore[misc]  # unpickling re-runs __init__
