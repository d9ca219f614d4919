"""Evaluation datasets: questions with their gold triple and answers."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from kifqa.errors import DataError
from kifqa.pipeline.text import normalize


@dataclass(frozen=True)
class GoldQuestion:
    """A question with its gold topic entity, property (``Pn``, or ``Rn`` when the question asks
    for the subject) and answer."""

    id: str
    text: str
    topic: str
    property: str
    answer: str

    @property
    def pid(self) -> str:
        return "P" + self.property[1:]

    @property
    def inverse(self) -> bool:
        return self.property.startswith("R")


def load_sqwd(data_dir: Path, split: str = "valid", *, limit: int | None = None) -> list[GoldQuestion]:
    """SimpleQuestions-Wikidata ``{split}_answerable.txt``: ``topic, property, answer, question``."""
    path = Path(data_dir) / "simplequestions-wikidata" / f"{split}_answerable.txt"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise DataError(f"cannot read {path} ({err}); set KIFQA_DATA_DIR") from err
    out = []
    for n, line in enumerate(lines[:limit] if limit else lines):
        parts = line.split("\t")
        if len(parts) != 4:
            raise DataError(f"{path}:{n + 1}: expected 4 tab-separated columns")
        topic, prop, ans, text = parts
        out.append(GoldQuestion(f"sqwd-{split}-{n}", text.strip(), topic, prop, ans))
    return out


class GoldExtender:
    """Extends a gold answer as the KIF-QA paper does: with the answers of the same property for
    every item whose label or alias equals the gold topic entity's label."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)

    @cached_property
    def _labels(self) -> dict[str, list[str]]:
        return json.loads((self.data_dir / "wikidata" / "entity_labels_en.json").read_text())

    @cached_property
    def _by_name(self) -> dict[str, set[str]]:
        index: dict[str, set[str]] = defaultdict(set)
        for qid, names in self._labels.items():
            for name in names:
                index[normalize(name)].add(qid)
        return index

    @cached_property
    def _triples(self) -> tuple[dict[tuple[str, str], set[str]], dict[tuple[str, str], set[str]]]:
        forward: dict[tuple[str, str], set[str]] = defaultdict(set)
        backward: dict[tuple[str, str], set[str]] = defaultdict(set)
        path = self.data_dir / "simplequestions-wikidata" / "kb_triples.tsv"
        for line in path.read_text(encoding="utf-8").splitlines():
            s, p, o = line.split("\t")
            forward[s, p].add(o)
            backward[o, p].add(s)
        return forward, backward

    def gold(self, q: GoldQuestion) -> set[str]:
        label = (self._labels.get(q.topic) or [""])[0]
        twins = self._by_name.get(normalize(label), set()) | {q.topic} if label else {q.topic}
        forward, backward = self._triples
        index = backward if q.inverse else forward
        found = {q.answer}
        for e in twins:
            found |= index.get((e, q.pid), set())
        return found
