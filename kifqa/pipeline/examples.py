"""Few-shot examples for the draft step: a fixed set, or the k most similar questions of a pool
(the clustered blocks are in :mod:`kifqa.pipeline.clustered`; :func:`kifqa.pipeline.open_examples` picks one)."""

from __future__ import annotations

import abc
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kifqa.data.sqwd import read_sqwd
from kifqa.data.wikidata import read_item_names, read_property_entries
from kifqa.pipeline.embeddings import EmbeddedPool
from kifqa.types import UNKNOWN


@dataclass(frozen=True)
class Example:
    """A question and the draft it should get."""

    question: str
    draft: str


class ExampleSource(abc.ABC):
    """Chooses the few-shot examples shown for a question."""

    @abc.abstractmethod
    def select(self, question: str) -> list[Example]:
        """The examples for ``question``, least similar first (the closest sits next to it)."""

    def prefix_key(self, question: str) -> str | None:
        """Names the few-shot block ``question`` gets: questions with the same key send prompts that
        share that block as a prefix, so answering them one after another on one model instance lets
        its prefix cache serve the block. ``None``: the examples are the question's own."""
        return None


class FixedExamples(ExampleSource):
    """The same hand-written examples for every question."""

    def __init__(self, examples: list[Example] | None = None) -> None:
        self.examples = examples if examples is not None else load_fixed_examples()

    def select(self, question: str) -> list[Example]:
        return list(self.examples)

    def prefix_key(self, question: str) -> str | None:
        return "fixed"


def load_fixed_examples() -> list[Example]:
    text = resources.files("kifqa.pipeline").joinpath("prompts/fixed_examples.jsonl").read_text()
    return [Example(**json.loads(line)) for line in text.splitlines() if line.strip()]


def sqwd_pool(data_dir: Path, *, split: str = "train", limit: int | None = None) -> list[Example]:
    """SimpleQuestions-Wikidata questions with their gold triple verbalised with labels.

    ``Pn`` rows ask for the value: ``(topic | property | ?x)``; ``Rn`` rows ask for the subject:
    ``(?x | property | topic)``. The topic is written as the question writes it when the question
    contains its label or an alias (so the examples teach copying the name); rows whose topic or
    property has no label are skipped.
    """
    base = Path(data_dir)
    entity_labels = read_item_names(base)
    property_labels = {p["id"]: p["label"] for p in read_property_entries(base)}
    pool: list[Example] = []
    for row in read_sqwd(base, split):
        topic, prop, question = row.topic, row.property, row.question
        names = entity_labels.get(topic) or []
        prop_label = property_labels.get("P" + prop[1:])
        if not names or not prop_label or not question:
            continue
        pool.append(Example(question, gold_draft(question, names, prop_label, inverse=prop.startswith("R"))))
        if limit is not None and len(pool) >= limit:
            break
    return pool


def gold_draft(question: str, topic_names: list[str], property_label: str, *, inverse: bool) -> str:
    """The draft a question's gold triple gives: ``(topic | property | ?x)``, or ``(?x | property |
    topic)`` when the question asks for the subject; the topic as the question writes it."""
    topic = _as_written(question, topic_names)
    return f"({UNKNOWN} | {property_label} | {topic})" if inverse else f"({topic} | {property_label} | {UNKNOWN})"


def _as_written(question: str, names: list[str]) -> str:
    """The first of ``names`` that ``question`` contains (ignoring case), spelt as in the question;
    else the first name."""
    folded = question.casefold()
    for name in names:
        at = folded.find(name.casefold())
        if at >= 0 and len(folded) == len(question):
            return question[at:at + len(name)]
    return names[0]


class RetrievedExamples(ExampleSource):
    """The ``k`` pool examples whose questions are closest to the question (sentence embeddings).

    A pool example whose question is the question itself is never shown (see :class:`EmbeddedPool`).
    """

    def __init__(self, pool: list[Example], *, k: int = 5, cache_dir: Path | None = None) -> None:
        self.pool = EmbeddedPool(pool, cache_dir=cache_dir)
        self.k = k

    def select(self, question: str) -> list[Example]:
        return self.pool.nearest(question, self.k)[::-1]
