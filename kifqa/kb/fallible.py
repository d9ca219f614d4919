"""Searches whose failure counts as no hit: a fallback a proxy refuses, an answer whose shape changed.

The question goes on with what the other searches found; each failure is kept for its trace
(:class:`~kifqa.kb.base.Hits`), and the log says so once per kind of failure, not once a question.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TypeVar

from kifqa.errors import KBError

T = TypeVar("T")

_logger = logging.getLogger(__name__)


class Fallible:
    """Runs the searches of one knowledge base (``name``) that may fail without failing the question."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._warned: set[tuple[str, type[BaseException]]] = set()

    async def hits(self, what: str, call: Awaitable[list[T]], failed: list[str], *,
                   errors: tuple[type[KBError], ...] = (KBError,)) -> list[T]:
        """``await call``; where it raises one of ``errors``, no hit, and ``what`` failed and why is added to
        ``failed`` (warned of the first time ``what`` fails so)."""
        try:
            return await call
        except errors as err:
            failed.append(f"{what} failed, counted as no hit: {err}")
            if (what, type(err)) not in self._warned:
                self._warned.add((what, type(err)))
                _logger.warning("%s: %s failed, counted as no hit (so may others, logged once): %s",
                                self._name, what, err)
            return []
