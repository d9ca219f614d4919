"""asyncio helpers for backends: state that belongs to one event loop.

``LLM.generate`` runs a fresh loop per call (``asyncio.run``), and Ray actors or the pipeline may
drive the same model object from yet another loop. Semaphores and HTTP clients are bound to the
loop that first uses them, so backends keep one of each per running loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """Lazily builds one ``T`` per running event loop (dropped with the loop)."""

    def __init__(self, factory: Callable[[], T]) -> None:
        """``factory`` builds the state; it runs inside the loop that will use it."""
        self._factory = factory
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()

    def get(self) -> T:
        """This loop's state, built on first use (call from a coroutine)."""
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = self._factory()
        return state

    def pop(self) -> T | None:
        """Removes and returns this loop's state, if any (call from a coroutine)."""
        return self._states.pop(asyncio.get_running_loop(), None)
