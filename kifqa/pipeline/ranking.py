"""How close in meaning a property is to a question: the relation step's ranking where the draft's
predicate names no property exactly.

A property is written as ``label: description`` and embedded with the question encoder
(:mod:`kifqa.pipeline.encoder`); its closeness is the mean of its cosines with the question and with the
draft's predicate. On valid 0-199 over the hard base, among the 22 questions whose draft named none of
their options exactly, the gold option came first for 13 (9 by spelling and word overlap alone), among
the first three for 19 (12) and among the twelve shown for all 22 (18); docs/architecture.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kifqa.data.pool import Example
from kifqa.data.text import name_key
from kifqa.pipeline.vectors import SavedVectors, memo
from kifqa.types import Candidate, Direction

#: A relation as the pool's drafts name it: the name key of the property's label, and its direction.
NamedRelation = tuple[str, Direction]


def property_text(prop: Candidate) -> str:
    """What is embedded of a property."""
    return f"{prop.label}: {prop.description}" if prop.description else prop.label


def closeness(question: str, predicate: str, properties: Sequence[Candidate], *,
              saved: SavedVectors | None = None) -> dict[str, float]:
    """Property id → the mean cosine of the property's text with ``question`` and with ``predicate``, 0
    where it is negative. The embeddings come from the process's :func:`~kifqa.pipeline.vectors.memo`,
    which keeps the question's from choosing its examples; the predicate's and the properties' are read
    from ``saved`` when the process has not met them (they recur across questions and runs)."""
    [asked] = memo().vectors([question])
    said, *vectors = memo().vectors([predicate, *map(property_text, properties)], saved=saved)
    query = (asked + said) / 2
    return {p.id: max(0.0, float(v @ query)) for p, v in zip(properties, vectors)}


def precedent(neighbours: Sequence[Example]) -> dict[NamedRelation, float]:
    """What a question asks for, judged by the pool questions nearest to it (``neighbours``): each
    relation's share of them (their gold drafts' property and direction)."""
    votes = Counter[NamedRelation]()
    for example in neighbours:
        predicate, backward = example.relation()
        votes[(name_key(predicate), "backward" if backward else "forward")] += 1
    return {relation: n / len(neighbours) for relation, n in votes.items()}
