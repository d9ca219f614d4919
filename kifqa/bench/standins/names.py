"""The names of a build's label index (:mod:`kifqa.kb.index`) held in memory, matched the way the public search
services match them: by prefix (Wikidata's ``wbsearchentities``) or by full text (the Wikidata API's
``list=search``; DBpedia Lookup's matching is :mod:`kifqa.bench.standins.keywords`), never by the local index's
tiers."""

from __future__ import annotations

import bisect
import functools
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from kifqa.data.text import index_key, typed_key
from kifqa.kb.index import Entry, Kind


@dataclass(frozen=True)
class Match:
    """An entity one of whose names matched, and which."""

    entity: Entry
    #: The name that matched.
    text: str
    #: ``label`` or ``alias``.
    type: str
    #: Whether the name is the search text itself (folded).
    exact: bool


class Names:
    """Every label and alias of a label index file, by kind, sorted by folded name (:func:`index_key`)."""

    def __init__(self, index_path: Path) -> None:
        con = sqlite3.connect(f"file:{quote(str(index_path))}?mode=ro&immutable=1", uri=True)
        try:
            aliases: dict[int, list[str]] = {}
            names: list[tuple[int, str, str, str, bool]] = []
            for entity, kind, text, norm, is_label in con.execute(
                    "SELECT entity, kind, text, norm, is_label FROM name ORDER BY rowid"):
                names.append((entity, kind, text, norm, bool(is_label)))
                if not is_label:
                    aliases.setdefault(entity, []).append(text)
            self.entities: dict[int, Entry] = {
                rowid: Entry(id, kind, label, tuple(aliases.get(rowid, ())), description, datatype, degree)
                for rowid, id, kind, label, description, datatype, degree in con.execute(
                    "SELECT rowid, id, kind, label, description, datatype, degree FROM entity")}
        finally:
            con.close()
        self.by_id = {e.id: e for e in self.entities.values()}
        self._sorted: dict[str, list[tuple[str, int, str, bool]]] = {}
        for entity, kind, text, norm, is_label in names:
            self._sorted.setdefault(kind, []).append((norm, entity, text, is_label))
        for rows in self._sorted.values():
            rows.sort()
        self._keys = {kind: [r[0] for r in rows] for kind, rows in self._sorted.items()}
        #: Each word of the items' names and descriptions (:func:`typed_key`'s), and the items that hold it.
        self._holders: dict[str, set[int]] = {}
        for _, entity, name, _ in self._sorted.get("item", []):
            for word in typed_key(name).split():
                self._holders.setdefault(word, set()).add(entity)
        for rowid, e in self.entities.items():
            if e.kind == "item":
                for word in typed_key(e.description).split():
                    self._holders.setdefault(word, set()).add(rowid)
        self._by_length: dict[int, list[str]] = {}
        for word in self._holders:
            self._by_length.setdefault(len(word), []).append(word)

    def prefixed(self, kind: Kind, text: str) -> list[Match]:
        """The entities of ``kind`` with a name that starts with ``text`` (folded), one match each (an exact
        one, else its label, else its first alias), ranked as ``wbsearchentities`` ranks: exact matches first,
        then by popularity."""
        key = index_key(text)
        if not key:
            return []
        rows, keys = self._sorted.get(kind, []), self._keys.get(kind, [])
        best: dict[int, tuple[tuple[bool, bool], Match]] = {}
        for norm, entity, name, is_label in rows[bisect.bisect_left(keys, key):]:
            if not norm.startswith(key):
                break
            exact = norm == key
            rank = (exact, is_label)
            if entity not in best or rank > best[entity][0]:
                best[entity] = (rank, Match(self.entities[entity], name, "label" if is_label else "alias", exact))
        return sorted((m for _, m in best.values()), key=lambda m: (not m.exact, -m.entity.degree, m.entity.id))

    def of(self, kind: Kind) -> list[tuple[str, int, str, bool]]:
        """Every name of ``kind``'s entities, by folded name: (folded name, entity rowid, name, is it the label)."""
        return self._sorted.get(kind, [])

    def fulltext(self, terms: list[tuple[str, bool]]) -> list[Entry]:
        """The items whose names and description hold every term (a word, and whether it may be misspelt: a
        fuzzy term matches words within the edit distance of Elasticsearch's ``AUTO`` fuzziness), ranked as
        a full-text search ranks: more terms matched as written first, then by popularity."""
        exact: dict[int, int] = {}
        every: set[int] | None = None
        for word, fuzzy in terms:
            holders = set(self._holders.get(word, ()))
            for held in holders:
                exact[held] = exact.get(held, 0) + 1
            if fuzzy and (distance := _fuzziness(word)):
                for other in self._near(word, distance):
                    holders |= self._holders[other]
            every = holders if every is None else every & holders
        ranked = sorted(every or (), key=lambda r: (-exact.get(r, 0), -self.entities[r].degree, self.entities[r].id))
        return [self.entities[r] for r in ranked]


    @functools.lru_cache(maxsize=4096)  # noqa: B019  # the names live as long as the server
    def _near(self, word: str, distance: int) -> tuple[str, ...]:
        """The words of the names within ``distance`` edits of ``word`` (itself excepted)."""
        return tuple(other for size in range(len(word) - distance, len(word) + distance + 1)
                     for other in self._by_length.get(size, ())
                     if other != word and within_edits(word, other, distance))


def _fuzziness(word: str) -> int:
    """Elasticsearch's ``AUTO`` fuzziness: no edit for 1-2 characters, one for 3-5, two beyond."""
    return 0 if len(word) <= 2 else 1 if len(word) <= 5 else 2


def within_edits(a: str, b: str, limit: int, *, transpositions: bool = False) -> bool:
    """Whether ``a`` turns into ``b`` in at most ``limit`` edits: insertions, deletions, substitutions and, with
    ``transpositions``, swaps of neighbours (the optimal-string-alignment distance, as Lucene's fuzzy queries count)."""
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] != b[j - 1]))
            if transpositions and i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > limit:
            return False
        before, previous = previous, current
    return previous[-1] <= limit
