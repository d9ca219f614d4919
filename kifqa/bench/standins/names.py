"""The names of a build's label index (:mod:`kifqa.kb.index`) held in memory, matched the way the public search
services match them: by prefix (Wikidata's ``wbsearchentities``) or by words (DBpedia Lookup), never by the
local index's typo and token tiers."""

from __future__ import annotations

import bisect
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from kifqa.data.text import index_key
from kifqa.kb.index import Kind


@dataclass(frozen=True)
class Named:
    """One entity as a search service sees it."""

    id: str
    kind: Kind
    label: str
    aliases: tuple[str, ...]
    description: str
    datatype: str
    #: Statements it is in: its popularity.
    degree: int


@dataclass(frozen=True)
class Match:
    """An entity one of whose names matched, and which."""

    entity: Named
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
            self.entities: dict[int, Named] = {
                rowid: Named(id, kind, label, tuple(aliases.get(rowid, ())), description, datatype, degree)
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

    def worded(self, kind: Kind, text: str) -> list[Match]:
        """The entities of ``kind`` with a name holding every word of ``text`` (folded), ranked as a keyword
        search ranks: exact names first, then by popularity."""
        key = index_key(text)
        words = set(key.split())
        if not words:
            return []
        best: dict[int, Match] = {}
        for norm, entity, name, is_label in self._sorted.get(kind, []):
            if words <= set(norm.split()):
                match = Match(self.entities[entity], name, "label" if is_label else "alias", norm == key)
                if entity not in best or (match.exact, is_label) > (best[entity].exact, best[entity].type == "label"):
                    best[entity] = match
        return sorted(best.values(), key=lambda m: (not m.exact, -m.entity.degree, m.entity.id))
