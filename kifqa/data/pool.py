"""The built-in example pools, SimpleQuestions-Wikidata's (:func:`sqwd_pool`) and SimpleDBpediaQA's
(:func:`sdbqa_pool`): each question with the draft its gold pattern gives (what the few-shot examples show, what the
zero-cost model answers and what oracle drafts use)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kifqa.data import paths
from kifqa.data.ids import iri_name
from kifqa.data.ontology import property_labels
from kifqa.data.sdbqa import read_sdbqa
from kifqa.data.sqwd import read_sqwd
from kifqa.data.wikidata import read_item_names, read_property_entries
from kifqa.types import UNKNOWN, Pattern


@dataclass(frozen=True)
class Example:
    """A question and the draft it should get; ``names``: its gold topic's names, label first (empty where the
    pool does not say), which the pool's priors read (:mod:`kifqa.examples.priors`)."""

    question: str
    draft: str
    names: tuple[str, ...] = ()

    def relation(self) -> tuple[str, bool]:
        """The predicate of the draft's main pattern and whether the unknown is its subject."""
        first = self.draft.splitlines()[0]
        pattern = Pattern.parse(first)
        return (first, False) if pattern is None else (pattern.predicate, pattern.subject == UNKNOWN)

    def known(self) -> str:
        """The entity the draft's main pattern names (empty when the draft does not parse)."""
        pattern = Pattern.parse(self.draft.splitlines()[0])
        return "" if pattern is None else pattern.known


def sqwd_pool(data_dir: Path, *, split: str = "train", limit: int | None = None) -> list[Example]:
    """SimpleQuestions-Wikidata questions with their gold triple verbalised with labels.

    ``Pn`` rows ask for the value: ``(topic | property | ?x)``; ``Rn`` rows ask for the subject:
    ``(?x | property | topic)``. The topic is written as the question writes it when the question
    contains its label or an alias (so the examples teach copying the name); rows whose topic or
    property has no label are skipped. Each example keeps its topic's names.
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
        draft = gold_draft(question, names, prop_label, inverse=prop.startswith("R"))
        pool.append(Example(question, draft, tuple(names)))
        if limit is not None and len(pool) >= limit:
            break
    return pool


#: SimpleDBpediaQA's validation questions from this one on (0-based, in file order) are the held-out report set
#: (``kifqa eval --dataset sdbqa:valid --start 700``): never pool examples.
SDBQA_HELD_OUT = 700


def sdbqa_pool(data_dir: Path, *, limit: int | None = None) -> list[Example]:
    """SimpleDBpediaQA's validation questions before :data:`SDBQA_HELD_OUT`, with their gold pattern verbalised:
    the subject's name from its IRI (``Sasha_Vujačić`` → ``Sasha Vujačić``) as the question writes it, the first
    predicate's English label in the DBpedia ontology (else its IRI's local name, ``birthPlace`` → ``birth
    place``), ``backward`` asking for the subject. Rows without a subject, predicate or question are skipped."""
    return _sdbqa_examples(data_dir, read_sdbqa(Path(data_dir) / paths.sdbqa("valid"))[:SDBQA_HELD_OUT], limit=limit)


def gold_examples(data_dir: Path) -> list[Example]:
    """Every question whose gold draft the data folder gives: SimpleQuestions-Wikidata's train and valid splits, then
    all of SimpleDBpediaQA's validation questions (the held-out ones too: what the zero-cost model answers from,
    never a pool)."""
    everything = [e for split in ("train", "valid") for e in sqwd_pool(data_dir, split=split)]
    return everything + _sdbqa_examples(data_dir, read_sdbqa(Path(data_dir) / paths.sdbqa("valid")))


def _sdbqa_examples(data_dir: Path, rows: list[dict[str, Any]], *, limit: int | None = None) -> list[Example]:
    """:func:`sdbqa_pool`'s examples of SimpleDBpediaQA ``rows``."""
    labels = property_labels(Path(data_dir))
    pool: list[Example] = []
    for row in rows:
        question, subject = str(row.get("Query") or "").strip(), str(row.get("Subject") or "")
        predicates = row.get("PredicateList") or [{}]
        predicate, direction = predicates[0].get("Predicate") or "", predicates[0].get("Direction")
        if not question or not subject or not predicate:
            continue
        name = iri_name(subject)
        draft = gold_draft(question, [name], labels.get(predicate) or property_name(predicate),
                           inverse=direction == "backward")
        pool.append(Example(question, draft, (name,)))
        if limit is not None and len(pool) >= limit:
            break
    return pool


def property_name(iri: str) -> str:
    """A property's name from its IRI's local part, its camel case spaced: ``birthPlace`` → ``birth place``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", iri_name(iri)).lower()


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
