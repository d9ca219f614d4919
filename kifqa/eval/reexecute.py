"""A released query executed again against a base, and its answers compared with the ones it was released with.

Silver data is kept only where its query reproduces its answers (:func:`kifqa.eval.silver.build_silver`), and a
release is checked against today's base the same way (:mod:`kifqa.eval.recheck`). Answers compare as
:func:`~kifqa.kb.fieldform.canonical` spells them, so an entity's IRI and its compact id, or a time written with
``Z`` and with ``+00:00``, are the same answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kifqa.errors import KBError
from kifqa.kb.base import KnowledgeBase
from kifqa.kb.fieldform import canonical, result_terms

#: Queries in flight at once against the base (its own limits still apply beneath).
CONCURRENCY = 8


@dataclass(frozen=True)
class Reexecution:
    """What a query gave when executed again, against the answers it was written for."""

    expected: frozenset[str]
    found: frozenset[str]
    #: Why the query could not be executed (``""``: it was).
    error: str = ""

    @property
    def reproduced(self) -> bool:
        return not self.error and self.found == self.expected

    @property
    def added(self) -> frozenset[str]:
        """Answers the base gives now that the row does not hold."""
        return self.found - self.expected

    @property
    def removed(self) -> frozenset[str]:
        """Answers the row holds that the base no longer gives."""
        return self.expected - self.found


async def reexecute(kb: KnowledgeBase, queries: Sequence[tuple[str, Iterable[str]]], *,
                    concurrency: int = CONCURRENCY) -> list[Reexecution]:
    """Each ``(query, answers)`` executed on ``kb`` and compared, in order; a query the base refuses is that
    row's error, never the batch's."""
    gate = asyncio.Semaphore(concurrency)

    async def one(query: str, answers: Iterable[str]) -> Reexecution:
        expected = frozenset(canonical(a) for a in answers)
        async with gate:
            try:
                result = await kb.select(query)
            except KBError as err:
                return Reexecution(expected, frozenset(), error=str(err).splitlines()[0])
        return Reexecution(expected, result_terms(result))

    return list(await asyncio.gather(*(one(q, a) for q, a in queries)))
