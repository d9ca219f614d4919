"""An example pool: the labelled questions of one corpus over one base, whose few-shot blocks, precedent votes and
priors the method draws on.

A pool is named by ``examples.pool``: a built-in (:data:`BUILT_IN`: ``sqwd``, SimpleQuestions-Wikidata's training
split; ``sdbqa``, SimpleDBpediaQA's validation questions before its held-out report set), or a user's file
(:func:`read_pool_file`). Unset, each base gets its own (:func:`pool_name`). Everything cached of a pool is keyed by
its content (:attr:`Pool.digest`), never by its name, so two pools never share an entry.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kifqa.data import paths
from kifqa.data.ids import expand, iri_name, is_wikidata_id
from kifqa.data.ontology import property_labels
from kifqa.data.pool import Example, gold_draft, property_name, sdbqa_pool, sqwd_pool
from kifqa.data.text import normalize
from kifqa.data.wikidata import read_item_names, read_property_entries
from kifqa.errors import ConfigError, DataError
from kifqa.kb.shape import shape

log = logging.getLogger(__name__)

#: The built-in pools by name.
BUILT_IN: Mapping[str, Callable[..., list[Example]]] = {"sqwd": sqwd_pool, "sdbqa": sdbqa_pool}
#: The pool each base's data model gets by default (:func:`kifqa.kb.shape.shape`).
DEFAULT_POOL = {"wikidata": "sqwd", "dbpedia": "sdbqa", "other": "sqwd"}
#: The file formats a user's pool may come in, by suffix.
FORMATS = (".jsonl", ".csv", ".parquet")
#: A pool file's columns: the question, and its gold pattern as ids of the base the pool is for.
REQUIRED = ("question", "entity", "property")
_DIRECTIONS = ("forward", "backward")
_PROPERTY_ID = re.compile(r"P[1-9][0-9]*")


@dataclass(frozen=True)
class RowError:
    """Why row ``row`` (1-based, in file order) of a pool file was left out: ``field`` holds no usable value."""

    row: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"row {self.row}: {self.field}: {self.message}"


@dataclass(frozen=True)
class Pool:
    """A named example pool: its examples, the language its questions are written in (rules written for one
    language fire only for a pool in it) and the rows of its file that were left out."""

    name: str
    examples: tuple[Example, ...]
    language: str = "en"
    errors: tuple[RowError, ...] = ()

    @functools.cached_property
    def digest(self) -> str:
        """The hash of the pool's content: its language and each example's question, draft and names."""
        content = json.dumps([self.language, [[e.question, e.draft, list(e.names)] for e in self.examples]])
        return hashlib.sha256(content.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        """The pool as a trace records it: its name and content hash (``sdbqa@3f2a…``)."""
        return f"{self.name}@{self.digest}"

    def asks(self, question: str) -> bool:
        """Whether one of the pool's examples asks ``question`` (after :func:`~kifqa.data.text.normalize`): answered
        with this pool, it is answered by a pool that holds its own gold pattern."""
        return normalize(question) in self._asked

    @functools.cached_property
    def _asked(self) -> frozenset[str]:
        return frozenset(normalize(e.question) for e in self.examples)


def as_pool(examples: Pool | Sequence[Example], *, name: str = "examples") -> Pool:
    """``examples`` as a :class:`Pool` (a bare list of English examples gets ``name``)."""
    return examples if isinstance(examples, Pool) else Pool(name, tuple(examples))


def pool_name(pool: str | None, kb_spec: str) -> str:
    """The pool ``examples.pool`` names, or where unset the one for the base ``kb_spec`` names
    (:data:`DEFAULT_POOL`: SimpleDBpediaQA's for the DBpedia bases)."""
    return pool or DEFAULT_POOL[shape(kb_spec)]


def open_pool(name: str, *, data_dir: Path, language: str = "en", limit: int | None = None) -> Pool:
    """The pool ``name`` names: a built-in (:data:`BUILT_IN`, in English) or a pool file (:func:`read_pool_file`,
    in ``language``); the first ``limit`` examples of it where given. The rows of a file left out are logged,
    one warning each."""
    if name in BUILT_IN:
        return Pool(name, tuple(BUILT_IN[name](Path(data_dir), limit=limit)))
    if Path(name).suffix.lower() not in FORMATS:
        raise ConfigError(f"examples.pool {name!r} is neither a built-in pool ({', '.join(BUILT_IN)}) nor a "
                          f"pool file ({', '.join(FORMATS)})")
    pool = read_pool_file(Path(name), data_dir=data_dir, language=language)
    for error in pool.errors:
        log.warning("example pool %s: %s (row left out)", name, error)
    return Pool(pool.name, pool.examples[:limit], pool.language, pool.errors) if limit is not None else pool


def read_pool_file(path: Path, *, data_dir: Path, language: str = "en") -> Pool:
    """A user's pool: a JSONL, CSV or Parquet file with, for each question, its gold pattern as ids of the base it
    is for: ``question``, ``entity`` (``Q42`` or an IRI), ``property`` (``P19`` or an IRI) and ``direction``
    (``forward``, the default: the entity is the statement's subject; ``backward``: the question asks for the
    subject). ``entity_label`` and ``property_label`` name them where the data folder does not (Wikidata ids are
    named from it, IRIs from the DBpedia ontology or their local names).

    Each row is checked on its own: a bad row gets one :class:`RowError` (its number and the first field at fault)
    and the good rows are the pool. :class:`ConfigError` where the file cannot be read or no row is good."""
    names = _Names(Path(data_dir))
    examples, errors = [], []
    for number, row in _rows(path):
        try:
            examples.append(_example(row, names))
        except _Bad as bad:
            errors.append(RowError(number, bad.field, bad.message))
    if not examples:
        shown = "; ".join(map(str, errors[:5])) or "it has no rows"
        raise ConfigError(f"example pool {path} has no usable row: {shown}")
    return Pool(str(path), tuple(examples), language, tuple(errors))


class _Bad(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    """Each row of a pool file, numbered from 1 (JSONL: its non-blank lines; CSV: the lines after the header)."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            yield from enumerate(pq.read_table(path).to_pylist(), 1)
        elif suffix == ".csv":
            with path.open(encoding="utf-8", newline="") as f:
                yield from enumerate(csv.DictReader(f), 1)
        else:
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            for number, line in enumerate(lines, 1):
                try:
                    yield number, json.loads(line)
                except ValueError as err:
                    yield number, err
    except (OSError, UnicodeDecodeError, ValueError) as err:  # pyarrow's errors are ValueErrors (ArrowInvalid)
        raise ConfigError(f"cannot read example pool {path}: {err}") from err


def _example(row: Any, names: _Names) -> Example:
    """The example of one pool row; :class:`_Bad` naming the first field at fault."""
    if isinstance(row, ValueError):
        raise _Bad("row", f"not JSON ({row})")
    if not isinstance(row, dict):
        raise _Bad("row", "expected an object with question, entity, property and direction")
    fields = {k: (v.strip() if isinstance(v, str) else v) for k, v in row.items()}
    for field in REQUIRED:
        if not isinstance(fields.get(field), str) or not fields[field]:
            raise _Bad(field, "missing or empty")
    question, entity, prop = fields["question"], fields["entity"], fields["property"]
    direction = fields.get("direction") or "forward"
    if direction not in _DIRECTIONS:
        raise _Bad("direction", f"{direction!r} is neither forward nor backward")
    if expand(entity) is None:
        raise _Bad("entity", f"{entity!r} is neither a Wikidata id (Q42) nor an IRI")
    if expand(prop) is None or (is_wikidata_id(prop) and not _PROPERTY_ID.fullmatch(prop)):
        raise _Bad("property", f"{prop!r} is neither a Wikidata property id (P19) nor an IRI")
    entity_names = [fields["entity_label"]] if fields.get("entity_label") else names.entity(entity)
    if not entity_names:
        raise _Bad("entity", f"no name known for {entity}: add an entity_label column")
    label = fields.get("property_label") or names.property(prop)
    if not label:
        raise _Bad("property", f"no label known for {prop}: add a property_label column")
    return Example(question, gold_draft(question, entity_names, label, inverse=direction == "backward"),
                   tuple(entity_names))


class _Names:
    """Names of a pool's ids, read on first need: Wikidata's from the data folder, IRIs' from the DBpedia ontology
    or their local names."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    @functools.cached_property
    def _items(self) -> dict[str, list[str]]:
        return read_item_names(self.data_dir)

    @functools.cached_property
    def _properties(self) -> dict[str, str]:
        return {p["id"]: p["label"] for p in read_property_entries(self.data_dir)}

    def entity(self, id: str) -> list[str]:
        if is_wikidata_id(id):
            return self._read(lambda: self._items).get(id) or []
        return [iri_name(id)]

    def property(self, id: str) -> str:
        if is_wikidata_id(id):
            return self._read(lambda: self._properties).get(id, "")
        ontology = (self.data_dir / paths.ONTOLOGY).is_file()
        return (property_labels(self.data_dir) if ontology else {}).get(id) or property_name(id)

    @staticmethod
    def _read(names: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return names()
        except DataError as err:
            raise ConfigError(f"naming the pool's ids: {err}; or give entity_label and property_label columns") \
                from err
