"""How close in meaning a property is to a question: the relation step's ranking where the draft's
predicate names no property exactly.

A property is written as ``label: description`` and embedded with the question encoder
(:mod:`kifqa.pipeline.encoder`); its closeness is the mean of its cosines with the question and with the
draft's predicate. On valid 0-199 over the hard base, among the 22 questions whose draft named none of
their options exactly, the gold option came first for 13 (9 by spelling and word overlap alone), among
the first three for 19 (12) and among the twelve shown for all 22 (18); docs/architecture.md.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from kifqa.pipeline.encoder import load_encoder
from kifqa.types import Candidate


def property_text(prop: Candidate) -> str:
    """What is embedded of a property."""
    return f"{prop.label}: {prop.description}" if prop.description else prop.label


class MeaningRanker:
    """Closeness of properties to a question, with each property's embedding computed once per process."""

    def __init__(self) -> None:
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def closeness(self, question: str, predicate: str, properties: Sequence[Candidate]) -> dict[str, float]:
        """Property id → the mean cosine of the property's text with ``question`` and with ``predicate``,
        0 where it is negative."""
        texts = {p.id: property_text(p) for p in properties}
        with self._lock:
            missing = [t for t in dict.fromkeys(texts.values()) if t not in self._vectors]
        asked = load_encoder().encode([question, predicate, *missing])
        with self._lock:
            self._vectors.update(zip(missing, asked[2:]))
            vectors = {id: self._vectors[t] for id, t in texts.items()}
        query = (asked[0] + asked[1]) / 2
        return {id: max(0.0, float(v @ query)) for id, v in vectors.items()}
