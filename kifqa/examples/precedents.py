"""How close in meaning a property is to a question: the relation step's ranking where the draft's
predicate names no property exactly.

A property is written as ``label: description`` and embedded with the question encoder
(:mod:`kifqa.examples.encoder`); its closeness is the mean of its cosines with the question and with the
draft's predicate.
What similar questions of the example pool ask for weighs in too (:class:`Precedents`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

from kifqa.data.pool import Example
from kifqa.data.text import name_key
from kifqa.examples.embeddings import EmbeddedPool, View
from kifqa.examples.text import masked
from kifqa.examples.vectors import SavedVectors, memo
from kifqa.kb.coalesce import Coalescer
from kifqa.types import Candidate, Direction

#: A relation as the pool's drafts name it: the name key of the property's label, and its direction.
NamedRelation = tuple[str, Direction]
#: Each relation's share of the votes (:class:`Precedents`).
Votes = dict[NamedRelation, float]


def property_text(prop: Candidate) -> str:
    """What is embedded of a property."""
    return f"{prop.label}: {prop.description}" if prop.description else prop.label


def closeness(question: str, predicate: str, properties: Sequence[Candidate], *,
              saved: SavedVectors | None = None) -> dict[str, float]:
    """Property id → the mean cosine of the property's text with ``question`` and with ``predicate``, 0
    where it is negative. The embeddings come from the process's :func:`~kifqa.examples.vectors.memo`,
    which keeps the question's from choosing its examples; the predicate's and the properties' are read
    from ``saved`` when the process has not met them (they recur across questions and runs)."""
    [asked] = memo().vectors([question])
    said, *vectors = memo().vectors([predicate, *map(property_text, properties)], saved=saved)
    query = (asked + said) / 2
    return {p.id: max(0.0, float(v @ query)) for p, v in zip(properties, vectors)}


#: The pool's questions with the entity their gold draft names written ``it``.
MASKED = View("masked", lambda e: masked(e.question, e.known()) or e.question)


class Precedents:
    """What similar questions of the pool ask for, whoever they ask it about.

    Names pull a question's nearest pool questions towards others about the same or similar names ("who is
    clara harris parent?" finds birthplaces of other people); without them, a question loses what its
    names say of the answer's type ("which song did it write"). So both vote: the ``k`` pool questions
    nearest to the question as written, and the ``k`` nearest to it with its draft's known entity written
    ``it`` (:func:`~kifqa.examples.text.masked`), among the pool's questions with their gold entity masked
    alike."""

    def __init__(self, pool: EmbeddedPool) -> None:
        self._plain = pool
        #: The pool's questions with their gold entity masked.
        self.masked = self._pool = EmbeddedPool(pool.examples, cache_dir=pool.cache_dir, view=MASKED)
        # Concurrent questions' votes are counted together: one encoder batch, one matrix product per pool.
        self._batches = Coalescer[int, tuple[str, str], Votes](
            self._count_many, size=64, wait_s=0.01)

    async def of(self, question: str, known: str, k: int) -> Votes:
        """Each relation's share of the votes for ``question`` asked about ``known``: the gold drafts'
        property and direction of its ``k`` nearest pool questions as written and masked (the question
        itself left out). Counted with those of other questions asked at the same time."""
        return await self._batches.lookup(k, (question, known))

    async def _count_many(self, k: int, asked: list[tuple[str, str]]) -> list[Votes | BaseException]:
        counted: list[Votes | BaseException] = [*await asyncio.to_thread(self.count, asked, k)]
        return counted

    def count(self, asked: list[tuple[str, str]], k: int) -> list[Votes]:
        """:meth:`of` for each (question, known entity) of ``asked``, in one batch."""
        questions = [q for q, _ in asked]
        hidden = self._pool.nearest_many(questions, k, like=[masked(q, known) or q for q, known in asked])
        return [_shares(a + b) for a, b in zip(hidden, self._plain.nearest_many(questions, k))]


def _shares(neighbours: list[Example]) -> Votes:
    """Each relation's share of ``neighbours``' gold drafts (property and direction)."""
    votes = Counter[NamedRelation]()
    for example in neighbours:
        predicate, backward = example.relation()
        votes[(name_key(predicate), "backward" if backward else "forward")] += 1
    return {relation: n / len(neighbours) for relation, n in votes.items()}
