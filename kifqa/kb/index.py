"""The label index: an SQLite file with every item's and property's names, for search and labelling.

Ranking tiers (``score`` is the tier plus a bonus below 1): exact label, ignoring case, accents and
punctuation (3: ``carranger zenkai`` and ``mark ohara`` name "Carranger: Zenkai!" and "Mark O'Hara");
exact alias (2); every query token in a label/alias, the last one as a prefix (1); properties only:
every token in the description (0.5); any whole token that is not common (0). Inside a tier, BM25
relevance and popularity (how many statements the entity is in) order the hits. Exact matches are
always all returned, even past ``limit``.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from kifqa.data.text import index_key, typed_key
from kifqa.data.wikidata import Dataset
from kifqa.errors import KBError
from kifqa.sqlite import select_in

Kind = Literal["item", "property"]

#: The index's version, part of the hash of every build that holds one: its keys are :func:`~kifqa.data.text.fold`'s
#: (2: strokes dropped, "Łódź" as "lodz"; 3: names' words as :func:`~kifqa.data.text.typed_key` types them).
VERSION = "3"

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entity (
  rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, label TEXT NOT NULL,
  description TEXT NOT NULL, datatype TEXT NOT NULL, degree INTEGER NOT NULL);
CREATE TABLE name (
  rowid INTEGER PRIMARY KEY, entity INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL,
  norm TEXT NOT NULL, words TEXT NOT NULL, is_label INTEGER NOT NULL);
CREATE INDEX name_words ON name (kind, words);
CREATE INDEX name_entity ON name (entity);
CREATE VIRTUAL TABLE item_fts USING fts5 (norm, content='', tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE property_fts USING fts5 (norm, content='', tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE description_fts USING fts5 (text, content='', tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE item_vocab USING fts5vocab (item_fts, 'row');
CREATE VIRTUAL TABLE property_vocab USING fts5vocab (property_fts, 'row');
"""
_TOKEN = re.compile(r"[^\W_]+")
_MAX_TOKENS = 16
#: Tokens in more names than this are left out of the any-token tier (``the``, ``of``...): they match
#: too much to help and make the query slow.
MAX_ANY_NAMES = 500
#: The any-token tier's base score of a name that holds every word of the text (less in proportion to the words it
#: holds, each weighed by how rare it is among names): a name that holds more of the words, or the rarer of them,
#: ranks first, whatever the names' popularity ("michael dertouzos": every "Michalis Dertouzos" before the most
#: popular "Michael").
_ANY_WORDS = 0.9


def search_words(text: str) -> list[str]:
    """The words of ``text`` that a search matches names by (of its :func:`~kifqa.data.text.index_key`, at most
    16)."""
    return _TOKEN.findall(index_key(text))[:_MAX_TOKENS]


def uncommon(words: list[str], holding: dict[str, int]) -> list[str]:
    """Those of ``words`` that the any-word tier searches: those in at most :data:`MAX_ANY_NAMES` names
    (``holding``: how many names hold each)."""
    return [w for w in words if holding[w] <= MAX_ANY_NAMES]


def rarity(names: int, holding: int) -> float:
    """How much a word held by ``holding`` of ``names`` names says of a name: the log of how many names there are
    to each that holds it (its inverse document frequency)."""
    return math.log((names + 1) / (holding + 1))


def any_words_share(weights: dict[str, float], name: str) -> float:
    """The any-word tier's base score of ``name`` (folded, as :func:`search_words` reads it): the share of the
    text's words it holds, each weighed by ``weights`` (its :func:`rarity`), up to :data:`_ANY_WORDS`."""
    held = weights.keys() & set(_TOKEN.findall(name))
    return _ANY_WORDS * sum(map(weights.__getitem__, held)) / (sum(weights.values()) or 1.0)


@dataclass(frozen=True)
class Entry:
    """What the index knows of one entity."""

    id: str
    kind: Kind
    label: str
    aliases: tuple[str, ...]
    description: str
    #: Wikidata datatype of a property (``""`` for items).
    datatype: str
    #: How many statements of the knowledge base the entity is in.
    degree: int


@dataclass(frozen=True)
class Hit:
    entry: Entry
    score: float
    #: ``label``, ``alias`` (exact), ``tokens``, ``description`` or ``any``.
    match: str


def build(path: Path, data: Dataset) -> dict[str, int]:
    """Writes the index of ``data`` to a new file at ``path``; returns its counts."""
    degree: Counter[str] = Counter()
    for t in data.triples:
        degree.update((t.subject, t.property))
        if data.properties[t.property].datatype in ("wikibase-item", "wikibase-property"):
            degree[t.value] += 1
    items = data.items.keys() | {id for id in degree if id.startswith("Q")}
    rows = [(id, "item", *_item_fields(data, id), degree[id]) for id in sorted(items)]
    rows += [(p.id, "property", p.label, p.aliases, p.description, p.datatype, degree[p.id])
             for p in data.properties.values()]
    con = sqlite3.connect(path)
    try:
        con.executescript(_SCHEMA)
        names = []
        for rowid, (id, kind, label, aliases, description, datatype, deg) in enumerate(rows, 1):
            con.execute("INSERT INTO entity VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (rowid, id, kind, label, description, datatype, deg))
            names += [(rowid, kind, text, index_key(text), typed_key(text), i == 0)
                      for i, text in enumerate((label, *aliases)) if text]
        con.executemany("INSERT INTO name (entity, kind, text, norm, words, is_label) VALUES (?, ?, ?, ?, ?, ?)",
                        names)
        for kind in ("item", "property"):
            con.execute(f"INSERT INTO {kind}_fts (rowid, norm) SELECT rowid, norm FROM name WHERE kind = ?", (kind,))
        con.execute("INSERT INTO description_fts (rowid, text) SELECT rowid, description FROM entity "
                    "WHERE kind = 'property' AND description != ''")
        counts = {"items": len(items), "properties": len(data.properties), "names": len(names)}
        meta = {**counts, **{f"max_degree_{k}": max((r[6] for r in rows if r[1] == k), default=0)
                             for k in ("item", "property")},
                "value_datatypes": json.dumps(sorted({data.properties[t.property].datatype for t in data.triples})),
                "subject_kinds": json.dumps(sorted({"property" if t.subject.startswith("P") else "item"
                                                    for t in data.triples}))}
        con.executemany("INSERT INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in meta.items()])
        con.commit()
    finally:
        con.close()
    return counts


def _item_fields(data: Dataset, id: str) -> tuple[str, tuple[str, ...], str, str]:
    record = data.items.get(id)
    return (record.label, record.aliases, "", "") if record else ("", (), "", "")


class LabelIndex:
    """Read-only access to a built label index; safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            if not path.is_file():
                raise sqlite3.OperationalError("no such file")
            self._con = sqlite3.connect(f"file:{quote(str(path))}?mode=ro&immutable=1", uri=True,
                                        check_same_thread=False)
            self._meta = dict(self._con.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as err:
            raise KBError(f"label index {path} is unreadable ({err}); rebuild it with `kifqa kb build --force`") \
                from err
        self._lock = threading.Lock()
        #: Entries read so far (the index is immutable): the same properties are described for
        #: question after question.
        self._entries: dict[str, Entry] = {}
        self._names: dict[tuple[Kind, str], int] = {}

    def close(self) -> None:
        self._con.close()

    def counts(self) -> dict[str, int]:
        return {k: int(self._meta[k]) for k in ("items", "properties", "names")}

    def value_datatypes(self) -> list[str]:
        """The Wikidata datatypes of the properties the statements use."""
        return list(json.loads(self._meta["value_datatypes"]))

    def subject_kinds(self) -> list[Kind]:
        """The kinds of the statements' subjects (``item``, ``property``)."""
        return list(json.loads(self._meta["subject_kinds"]))

    def entries(self, ids: Iterable[str]) -> dict[str, Entry]:
        """The entries of the given ids (unknown ids are left out)."""
        ids = list(dict.fromkeys(ids))
        with self._lock:
            missing = [id for id in ids if id not in self._entries]
            if missing:
                self._entries.update((row[0], _entry(row)) for row in select_in(
                    self._con,
                    "SELECT e.id, e.kind, e.label, e.description, e.datatype, e.degree, "
                    "(SELECT json_group_array(text) FROM (SELECT text FROM name "
                    " WHERE entity = e.rowid AND is_label = 0 ORDER BY rowid)) "
                    "FROM entity e WHERE e.id IN ({marks})", missing))
            return {id: self._entries[id] for id in ids if id in self._entries}

    def labels(self, ids: Iterable[str]) -> dict[str, str]:
        """English labels of the given ids (unknown or unlabelled ids are left out)."""
        return {id: e.label for id, e in self.entries(ids).items() if e.label}

    def named(self, texts: Iterable[str]) -> list[str]:
        """Those of ``texts`` that are exactly some item's label or alias, case, accents and punctuation
        folded (:func:`~kifqa.data.text.typed_key`), in the order given."""
        keys = {text: typed_key(text) for text in texts}
        with self._lock:
            found = {row[0] for row in select_in(
                self._con, "SELECT DISTINCT words FROM name WHERE kind = 'item' AND words IN ({marks})",
                sorted({k for k in keys.values() if k}))}
        return [text for text, key in keys.items() if key in found]

    def search(self, kind: Kind, text: str, limit: int) -> list[Hit]:
        """Entities of ``kind`` matching ``text``: all exact matches, then up to ``limit`` in all. Text without
        a word (``-``, ``*``, ``?``) matches nothing: its typed words are those of any name made of punctuation."""
        typed = typed_key(text)
        if not typed:
            return []
        key = index_key(text)
        with self._lock:
            exact = self._con.execute(  # the typed words: the same ``norm`` has the same words
                "SELECT e.id, max(n.is_label) FROM name n JOIN entity e ON e.rowid = n.entity "
                "WHERE n.kind = ? AND n.words = ? GROUP BY e.id", (kind, typed)).fetchall()
            found: dict[str, tuple[float, float, str]] = {
                id: (3.0 if is_label else 2.0, 0.0, "label" if is_label else "alias") for id, is_label in exact}
            tokens = _TOKEN.findall(key)[:_MAX_TOKENS]
            for base, match, sql, query in self._token_queries(kind, tokens):
                if len(found) >= max(limit, len(exact)):
                    break
                rows = self._con.execute(sql, (query, 4 * limit + len(found))).fetchall()
                weights = {t: self._rarity(kind, t) for t in tokens} if match == "any" else {}
                for id, rank, norm in rows:
                    if id in found:
                        continue
                    if match == "any":
                        base = any_words_share(weights, norm)
                    found[id] = (base, -rank / (1 - rank), match)
        entries = self.entries(found)
        top = self._max_degree(kind)
        hits = [Hit(entries[id], self._score(base, rel, entries[id].degree, top), match)
                for id, (base, rel, match) in found.items()]
        hits.sort(key=lambda h: (-h.score, h.entry.id))
        return hits[:max(limit, len(exact))]

    def _token_queries(self, kind: Kind, tokens: list[str]) -> Iterator[tuple[float, str, str, str]]:
        if not tokens:
            return
        names = (f"SELECT e.id, f.rank, n.norm FROM {kind}_fts f JOIN name n ON n.rowid = f.rowid "
                 f"JOIN entity e ON e.rowid = n.entity WHERE {kind}_fts MATCH ? ORDER BY f.rank LIMIT ?")
        yield 1.0, "tokens", names, " AND ".join([*(f'"{t}"' for t in tokens[:-1]), f'"{tokens[-1]}"*'])
        if kind == "property":
            yield 0.5, "description", ("SELECT e.id, f.rank, '' FROM description_fts f "
                                       "JOIN entity e ON e.rowid = f.rowid "
                                       "WHERE description_fts MATCH ? ORDER BY f.rank LIMIT ?"), \
                " AND ".join(f'"{t}"' for t in tokens)
        rare = uncommon(tokens, {t: self._names_with(kind, t) for t in tokens})
        if len(tokens) > 1 and rare:
            yield 0.0, "any", names, " OR ".join(f'"{t}"' for t in rare)

    def _names_with(self, kind: Kind, token: str) -> int:
        """How many names of ``kind`` hold ``token`` (remembered: common words come back question after
        question)."""
        key = (kind, token)
        if key not in self._names:
            row = self._con.execute(f"SELECT doc FROM {kind}_vocab WHERE term = ?", (token,)).fetchone()
            self._names[key] = int(row[0]) if row else 0
        return self._names[key]

    def _rarity(self, kind: Kind, token: str) -> float:
        """How much ``token`` says of a name of ``kind`` (:func:`rarity`)."""
        return rarity(int(self._meta["names"]), self._names_with(kind, token))

    def _max_degree(self, kind: Kind) -> int:
        return int(self._meta[f"max_degree_{kind}"])

    @staticmethod
    def _score(base: float, relevance: float, degree: int, top: int) -> float:
        popularity = math.log1p(degree) / math.log1p(top) if top else 0.0
        if base >= 2.0:
            return base + 0.9 * popularity
        return base + 0.5 * relevance + 0.4 * popularity


def _entry(row: tuple) -> Entry:
    id, kind, label, description, datatype, degree, aliases = row
    return Entry(id, kind, label, tuple(json.loads(aliases)), description, datatype, degree)
