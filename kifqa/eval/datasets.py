"""Evaluation datasets: questions with their gold triple and answers.

Three sources, one record (:class:`GoldQuestion`):

- SimpleQuestions-Wikidata (:func:`load_sqwd`): ``topic, Pn|Rn, answer, question``; ``Rn`` means
  the question asks for the statement's subject.
- SimpleDBpediaQA (:func:`load_simpledbpediaqa`): a subject IRI and a list of alternative
  predicates (IRI, direction, optional class constraint); no answer objects.
- Any corpus with gold answers (:func:`load_gold_file`): JSONL, CSV/TSV or Parquet with a question
  column, an answers column and, optionally, the gold topic entity and property.

:func:`load_gold` turns a dataset spec (``sqwd:valid``, ``sdbqa:valid``, a file path) into questions.
"""

from __future__ import annotations

import builtins
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from pathlib import Path
from typing import Any

from kifqa.data import paths
from kifqa.data.dbpedia_map import DBpediaLinks
from kifqa.data.ids import canonical_id, iri_name
from kifqa.data.sdbqa import read_sdbqa
from kifqa.data.sqwd import read_sqwd
from kifqa.data.text import normalize, question_key, typed_key
from kifqa.data.wikidata import NO_LABEL, read_item_names, read_property_entries, read_statements
from kifqa.errors import ConfigError, DataError
from kifqa.runs.corpus import has_ids, read_rows, row_id
from kifqa.types import Direction

_SQWD_PROPERTY = re.compile(r"[PR][1-9][0-9]*")
#: What a base adds to the data folder's: statements ``(subject, property, value)`` and items' names.
Distractors = tuple[list[tuple[str, str, str]], dict[str, list[str]]]


@dataclass(frozen=True, kw_only=True)
class GoldRelation:
    """One acceptable (property, direction) for a question's topic entity. ``forward``: the topic
    is the statement's subject; ``backward``: it is the statement's value (the question asks for
    the subject). ``constraint`` is a class the answers must belong to (SimpleDBpediaQA)."""

    property: str
    direction: Direction
    constraint: str | None = None


@dataclass(frozen=True, kw_only=True)
class GoldQuestion:
    """A question with its gold topic entity, property (``Pn``, or ``Rn`` when the question asks
    for the subject) and answer.

    Datasets other than SimpleQuestions-Wikidata fill what they have: ``answers`` (all gold
    answers), ``alternatives`` (acceptable relations, any one is right), ``dataset`` (its name).
    Empty strings mean "not known".
    """

    id: str
    text: str
    topic: str
    property: str
    answer: str
    answers: tuple[str, ...] = ()
    alternatives: tuple[GoldRelation, ...] = ()
    dataset: str = ""

    # ``property`` names a field in this class, so the decorator is spelt in full.
    @builtins.property
    def pid(self) -> str:
        """``Pn`` for SimpleQuestions' ``Pn``/``Rn``; other properties as they are."""
        return "P" + self.property[1:] if self.sqwd_style else self.property

    @builtins.property
    def inverse(self) -> bool:
        """True when the question asks for the statement's subject."""
        if self.sqwd_style:
            return self.property.startswith("R")
        return bool(self.alternatives) and self.alternatives[0].direction == "backward"

    @builtins.property
    def sqwd_style(self) -> bool:
        """True when ``property`` is SimpleQuestions-Wikidata's ``Pn``/``Rn``."""
        return bool(_SQWD_PROPERTY.fullmatch(self.property))

    @builtins.property
    def relations(self) -> tuple[GoldRelation, ...]:
        """The acceptable (property, direction) pairs (empty when the dataset has none)."""
        if self.alternatives:
            return self.alternatives
        if self.sqwd_style:
            return (GoldRelation(property=self.pid, direction="backward" if self.inverse else "forward"),)
        if self.property:
            return (GoldRelation(property=self.property, direction="forward"),)
        return ()

    @builtins.property
    def gold_answers(self) -> frozenset[str]:
        """The answers the dataset itself gives (not extended)."""
        return frozenset(a for a in (self.answer, *self.answers) if a)


# --- SimpleQuestions-Wikidata ---------------------------------------------------------------------

def load_sqwd(data_dir: Path, split: str = "valid", *, limit: int | None = None) -> list[GoldQuestion]:
    """SimpleQuestions-Wikidata ``{split}_answerable.txt``: ``topic, property, answer, question``."""
    return [GoldQuestion(id=f"sqwd-{split}-{row.line - 1}", text=row.question, topic=row.topic,
                         property=row.property, answer=row.answer,
                         dataset=f"sqwd:{split}") for row in read_sqwd(data_dir, split, limit=limit)]


# --- SimpleDBpediaQA --------------------------------------------------------------------------------

def load_simpledbpediaqa(data_dir: Path, split: str = "valid", *, limit: int | None = None,
                         path: Path | None = None) -> list[GoldQuestion]:
    """SimpleDBpediaQA ``simpledbpediaqa/{split}.json`` (or ``path``): ``{"Questions": [{"ID",
    "Query", "Subject", "PredicateList": [{"Predicate", "Direction", "Constraint"}]}]}``.

    The predicates of a question are alternatives (any one answers it); ``property`` is the first.
    """
    path = Path(path) if path else Path(data_dir) / paths.sdbqa(split)
    rows = read_sdbqa(path)
    out = []
    for n, row in enumerate(rows[:limit] if limit else rows):
        try:
            alternatives = tuple(
                GoldRelation(property=p["Predicate"], direction=_direction(p["Direction"]),
                             constraint=p.get("Constraint") or None)
                for p in row["PredicateList"])
            out.append(GoldQuestion(
                id=f"sdbqa-{split}-{row['ID']}", text=str(row["Query"]).strip(), topic=row["Subject"],
                property=alternatives[0].property if alternatives else "", answer="", alternatives=alternatives,
                dataset=f"sdbqa:{split}"))
        except (KeyError, TypeError, ValueError) as err:
            raise DataError(f"{path}: question {n + 1} is malformed ({type(err).__name__}: {err})") from err
    return out


def _direction(text: Any) -> Direction:
    d = str(text).strip().lower()
    if d not in ("forward", "backward"):
        raise ValueError(f"direction must be forward or backward, not {text!r}")
    return "forward" if d == "forward" else "backward"


# --- any corpus with gold answers ------------------------------------------------------------------

#: Column names read by :func:`load_gold_file` (the first one present wins).
ID_COLUMNS = ("id", "question_id")
QUESTION_COLUMNS = ("question", "text", "query")
ANSWER_COLUMNS = ("answers", "answer", "gold")
TOPIC_COLUMNS = ("topic", "subject", "entity")
PROPERTY_COLUMNS = ("property", "predicate", "relation")


def load_gold_file(path: str | Path, *, limit: int | None = None) -> list[GoldQuestion]:
    """A corpus with gold answers: JSONL (``.jsonl``), CSV/TSV (``.csv``, ``.tsv``) or Parquet.

    Columns: ``question``, ``answers`` (a list; in CSV a JSON list or ``|``-separated ids) and
    optionally ``id``, ``topic`` (the gold topic entity), ``property`` (``Pn``/``Rn``, or any property
    id with ``direction`` ``forward``/``backward``). Rows are read and numbered as ``kifqa run`` reads
    a corpus (:func:`kifqa.runs.corpus.read_rows`), with its ids: ``q000001``... by row when no row
    has an id column (:func:`~kifqa.runs.corpus.has_ids`, :func:`~kifqa.runs.corpus.row_id`).
    """
    path = Path(path)
    try:
        rows = list(read_rows(path))
    except ConfigError as err:
        raise DataError(f"{path}: not a gold file: {err}") from err
    except OSError as err:
        raise DataError(f"cannot read {path} ({err})") from err
    fields_of = [fields for _, fields in rows]
    id_column = next((c for c in ID_COLUMNS if has_ids(fields_of, c)), ID_COLUMNS[0])
    with_ids = has_ids(fields_of, id_column)
    out: list[GoldQuestion] = []
    for n, row in rows:
        if limit and len(out) >= limit:
            break
        if not isinstance(row, dict):
            raise DataError(f"{path}: row {n}: {row}")
        text = _first(row, QUESTION_COLUMNS)
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{path}: row {n} has no question")
        qid, id_error = row_id(row.get(id_column), has_ids=with_ids, number=n)
        if qid is None:
            raise DataError(f"{path}: row {n}: {id_error}")
        answers = _answers(_first(row, ANSWER_COLUMNS))
        topic = str(_first(row, TOPIC_COLUMNS) or "")
        prop = str(_first(row, PROPERTY_COLUMNS) or "")
        alternatives: tuple[GoldRelation, ...] = ()
        if prop and not _SQWD_PROPERTY.fullmatch(prop):
            try:
                alternatives = (GoldRelation(property=prop, direction=_direction(row.get("direction") or "forward")),)
            except ValueError as err:
                raise DataError(f"{path}: row {n}: {err}") from err
        out.append(GoldQuestion(id=qid, text=text.strip(), topic=topic, property=prop, answer="", answers=answers,
                                alternatives=alternatives,
                                dataset=str(path)))
    return out


def _first(row: dict[str, Any], names: Iterable[str]) -> Any:
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    return None


def _answers(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                value = [text]
        else:
            value = [a for a in (p.strip() for p in text.split("|")) if a]
    if not isinstance(value, (list, tuple)):
        value = [value]
    return tuple(dict.fromkeys(str(a) for a in value if a not in (None, "")))


# --- dataset specs ---------------------------------------------------------------------------------

#: Dataset names of :func:`load_gold` and the loader of each.
DATASETS = {"sqwd": "SimpleQuestions-Wikidata", "sdbqa": "SimpleDBpediaQA"}
_ALIASES = {"simplequestions-wikidata": "sqwd", "simpledbpediaqa": "sdbqa"}


def load_gold(spec: str, data_dir: Path, *, limit: int | None = None, start: int = 0) -> list[GoldQuestion]:
    """Questions of a dataset spec: ``sqwd:valid``, ``sqwd:train``, ``sdbqa:valid`` (the data
    folder's files), or the path of a gold file (JSONL/CSV/TSV/Parquet, or a SimpleDBpediaQA-format
    ``.json``): the ``limit`` questions from position ``start`` (0-based; ids keep their position)."""
    if start < 0:
        raise DataError(f"start must be 0 or more, not {start}")
    questions = _load_spec(spec, data_dir, limit=limit + start if limit else None)
    return questions[start:]


def _load_spec(spec: str, data_dir: Path, *, limit: int | None) -> list[GoldQuestion]:
    name, sep, split = spec.partition(":")
    name = _ALIASES.get(name.lower(), name.lower())
    if sep and name in DATASETS:
        if name == "sqwd":
            if split not in ("valid", "train"):
                raise DataError(f"unknown split {split!r} of sqwd: use sqwd:valid or sqwd:train")
            return load_sqwd(data_dir, split, limit=limit)
        return load_simpledbpediaqa(data_dir, split or "valid", limit=limit)
    if name in DATASETS and not sep:
        return _load_spec(f"{name}:valid", data_dir, limit=limit)
    path = Path(spec)
    if not path.is_file():
        raise DataError(f"unknown dataset {spec!r}: use sqwd:valid, sqwd:train, sdbqa:valid or a gold file "
                        "(.jsonl, .csv, .tsv, .parquet, SimpleDBpediaQA .json)")
    if path.suffix.lower() == ".json":
        return load_simpledbpediaqa(data_dir, path.stem, limit=limit, path=path)
    return load_gold_file(path, limit=limit)


# --- gold extension and names ----------------------------------------------------------------------

class GoldExtender:
    """Extends a gold answer as the KIF-QA paper does: with the answers of the same property for
    every item whose label or alias equals the gold topic entity's label.

    Applies to SimpleQuestions-Wikidata questions (``sqwd:`` datasets), using the data folder's labels
    and statements, plus, on the hard base, the ``distractors`` it adds (its statements and its synthetic
    items' names: ``(statements, {"Q…": [names]})``, read on first use); with ``extend_other``, also to
    questions of other datasets (gold files) that give a topic and a ``Pn``/``Rn`` property. Other
    questions keep the answers their dataset gives.
    Also names things for reports: :meth:`names` of an entity, :meth:`property_label`.
    """

    def __init__(self, data_dir: Path, *, extend_other: bool = False,
                 dbpedia_links: Callable[[], DBpediaLinks] | None = None,
                 distractors: Callable[[], Distractors] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.extend_other = extend_other
        self._dbpedia_links = dbpedia_links
        self._distractors = distractors

    @property
    def hard(self) -> bool:
        """Whether the hard build's namesakes extend the gold."""
        return self._distractors is not None

    @cached_property
    def _added(self) -> Distractors:
        return self._distractors() if self._distractors else ([], {})

    @cached_property
    def _labels(self) -> dict[str, list[str]]:
        return {**read_item_names(self.data_dir), **self._added[1]}

    @cached_property
    def _by_name(self) -> dict[str, set[str]]:
        index: dict[str, set[str]] = defaultdict(set)
        for qid, names in self._labels.items():
            for name in names:
                key = normalize(name)
                if key and key != NO_LABEL:
                    index[key].add(qid)
        return index

    @cached_property
    def _triples(self) -> tuple[dict[tuple[str, str], set[str]], dict[tuple[str, str], set[str]]]:
        forward: dict[tuple[str, str], set[str]] = defaultdict(set)
        backward: dict[tuple[str, str], set[str]] = defaultdict(set)
        for s, p, o in chain(((s, p, o) for s, p, o, _ in read_statements(self.data_dir)), self._added[0]):
            forward[s, p].add(o)
            backward[o, p].add(s)
        return forward, backward

    @cached_property
    def _property_labels(self) -> dict[str, str]:
        try:
            return {p["id"]: p.get("label") or p["id"] for p in read_property_entries(self.data_dir)}
        except (DataError, KeyError, TypeError):
            return {}

    @cached_property
    def _sqwd_valid(self) -> dict[str, GoldQuestion]:
        return {question_key(q.text): q for q in load_sqwd(self.data_dir, "valid")}

    @cached_property
    def _dbpedia(self) -> DBpediaLinks:
        if self._dbpedia_links is None:
            raise DataError("SimpleDBpediaQA gold needs the links of the DBpedia build "
                            "(GoldExtender(dbpedia_links=...))")
        return self._dbpedia_links()

    def gold(self, q: GoldQuestion) -> set[str]:
        if q.dataset.startswith("sdbqa:") and not q.gold_answers:
            return self._sdbqa_gold(q)
        if not (q.sqwd_style and q.topic and (self.extend_other or q.dataset.startswith("sqwd:"))):
            return set(q.gold_answers)
        label = self._label(q.topic)
        twins = (self._by_name.get(normalize(label), set()) | {q.topic}) if label else {q.topic}
        forward, backward = self._triples
        index = backward if q.inverse else forward
        found = set(q.gold_answers)
        for e in twins:
            found |= index.get((e, q.pid), set())
        return found

    def _sdbqa_gold(self, q: GoldQuestion) -> set[str]:
        """A SimpleDBpediaQA question has no answers; where its text is a SimpleQuestions-Wikidata valid
        question, that question's (extended) answers, converted to the DBpedia encoding, are its gold, if its
        statement's property was converted (has a DBpedia equivalent); otherwise it has no gold."""
        twin = self._sqwd_valid.get(question_key(q.text))
        if twin is None:
            return set()
        links = self._dbpedia
        if twin.pid not in links.properties:
            return set()
        return {links.resources[a] for a in self.gold(twin) if a in links.resources}

    @cached_property
    def _topic_relations(self) -> dict[str, set[tuple[str, str]]]:
        """Entity -> the (property, direction) pairs of its statements in the local base (Wikidata ids)."""
        found: dict[str, set[tuple[str, str]]] = defaultdict(set)
        forward, backward = self._triples
        for s, p in forward:
            found[s].add((p, "forward"))
        for o, p in backward:
            found[o].add((p, "backward"))
        return found

    @cached_property
    def _dbpedia_items(self) -> dict[str, str]:
        return {canonical_id(iri): qid for qid, iri in self._dbpedia.resources.items()}

    def topic_relations(self, topic: str) -> int | None:
        """How many (property, direction) pairs the topic entity has in the data folder's base (a
        Wikidata id, or a DBpedia IRI in the DBpedia encoding); ``None`` when there is no topic."""
        if not topic:
            return None
        entity = canonical_id(topic)
        if "/" not in entity and "#" not in entity:
            return len(self._topic_relations.get(entity, ()))
        item = self._dbpedia_items.get(entity)
        if item is None:
            return 0
        properties = self._dbpedia.properties
        return len({(properties[p], d) for p, d in self._topic_relations.get(item, ()) if p in properties})

    def _label(self, qid: str) -> str:
        label = (self._labels.get(qid) or [""])[0]
        return "" if normalize(label) == NO_LABEL else label

    def names(self, entity: str) -> list[str]:
        """An entity's label and aliases (Wikidata items of the data folder), or the readable
        local name of an IRI; empty when nothing is known."""
        entity = canonical_id(entity)
        if "/" in entity or "#" in entity:
            name = iri_name(entity)
            return [name, re.sub(r"\s*[(,].*$", "", name)] if name else []
        try:
            names = self._labels.get(entity) or []
        except DataError:
            return []
        return [n for n in names if normalize(n) != NO_LABEL]

    def names_topic(self, q: GoldQuestion) -> bool | None:
        """Whether ``q``'s text names its gold topic: one of the topic's :meth:`names` is a run of the question's
        words (case, accents and punctuation folded, apostrophes parting words or not); ``None`` when the topic
        has no name here. A question that does not ("what is a romantic film" for *romance film*) can be answered
        only by a name the base does not know."""
        names = self.names(q.topic) if q.topic else []
        if not names:
            return None
        asked = {key: f" {key(q.text)} " for key in (question_key, typed_key)}
        return any(f" {key(n)} " in text for key, text in asked.items() for n in names if key(n))

    def property_label(self, prop: str) -> str:
        """A property's label (Wikidata ids from the data folder, IRIs by their local name)."""
        if "/" in prop or "#" in prop:
            return iri_name(prop)
        return self._property_labels.get(prop, prop)

