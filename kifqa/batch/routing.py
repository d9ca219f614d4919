"""Spreads calls over a pool of actors: the one with the fewest calls in flight from this process."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class LeastLoaded(Generic[T]):
    """Picks among ``members`` the one with the fewest calls in flight; ties go round-robin."""

    def __init__(self, members: list[T]) -> None:
        if not members:
            raise ValueError("a pool needs at least one member")
        self.members = members
        self._in_flight = [0] * len(members)
        self._turn = itertools.count()

    @contextmanager
    def pick(self) -> Iterator[T]:
        """The chosen member, counted as busy until the block ends."""
        n = len(self.members)
        offset = next(self._turn)
        i = min(((offset + k) % n for k in range(n)), key=self._in_flight.__getitem__)
        self._in_flight[i] += 1
        try:
            yield self.members[i]
        finally:
            self._in_flight[i] -= 1

    def __getstate__(self) -> dict[str, object]:
        # A copy (another task's proxy) starts with nothing in flight.
        return {"members": self.members}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(state["members"])  # type: ignore[misc, arg-type]
