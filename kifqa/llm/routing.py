"""Spreads calls over a pool (Ray actors, or in-process model instances): the one with the fewest calls
in flight from this process, or the one that serves the call's shared prompt prefix."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class LeastLoaded(Generic[T]):
    """Picks among ``members`` the one with the fewest calls in flight; ties go round-robin.

    A call with an affinity key (a shared prompt prefix) goes to the member the key hashes to, the
    same one in every process, so that member's prefix cache serves the prefix; unless that member
    has more than ``spill`` calls in flight beyond the least loaded one, which then takes the call.
    """

    def __init__(self, members: list[T], *, spill: int = 2) -> None:
        if not members:
            raise ValueError("a pool needs at least one member")
        self.members = members
        self.spill = spill
        self._in_flight = [0] * len(members)
        self._turn = itertools.count()

    @contextmanager
    def pick(self, affinity: str | None = None) -> Iterator[T]:
        """The chosen member, counted as busy until the block ends."""
        n = len(self.members)
        offset = next(self._turn)
        i = min(((offset + k) % n for k in range(n)), key=self._in_flight.__getitem__)
        if affinity is not None:
            home = int.from_bytes(hashlib.blake2b(affinity.encode(), digest_size=8).digest(), "big") % n
            if self._in_flight[home] <= self._in_flight[i] + self.spill:
                i = home
        self._in_flight[i] += 1
        try:
            yield self.members[i]
        finally:
            self._in_flight[i] -= 1

    def __getstate__(self) -> dict[str, object]:
        # A copy (another task's proxy) starts with nothing in flight.
        return {"members": self.members, "spill": self.spill}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["members"], spill=state["spill"])  # type: ignore[misc]  # unpickling re-runs __init__
