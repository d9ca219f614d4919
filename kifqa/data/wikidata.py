"""The offline Wikidata data of the data folder: item names, properties and statements, read and checked."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kifqa.data.paths import ITEM_LABELS, PROPERTIES, TRIPLES, check_data_dir
from kifqa.data.text import index_key, spaced
from kifqa.errors import DataError

#: A label the crawls put where Wikidata had none; it is not a name.
NO_LABEL = "no label defined"

#: Wikidata datatype names and their ``wikibase:propertyType`` (local names in ``http://wikiba.se/ontology#``).
WIKIBASE_TYPES = {
    "wikibase-item": "WikibaseItem",
    "wikibase-property": "WikibaseProperty",
    "wikibase-lexeme": "WikibaseLexeme",
    "wikibase-sense": "WikibaseSense",
    "wikibase-form": "WikibaseForm",
    "external-id": "ExternalId",
    "string": "String",
    "url": "Url",
    "quantity": "Quantity",
    "time": "Time",
    "monolingualtext": "Monolingualtext",
    "commonsMedia": "CommonsMedia",
    "math": "Math",
    "musical-notation": "MusicalNotation",
    "globe-coordinate": "GlobeCoordinate",
    "geo-shape": "GeoShape",
    "tabular-data": "TabularData",
    "entity-schema": "EntitySchema",
}

_ITEM_ID = re.compile(r"Q[1-9][0-9]*")
_PROPERTY_ID = re.compile(r"P[1-9][0-9]*")


@dataclass(frozen=True, kw_only=True)
class ItemRecord:
    id: str
    label: str
    aliases: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class PropertyRecord:
    id: str
    label: str
    aliases: tuple[str, ...]
    description: str
    #: Wikidata datatype name (``wikibase-item``, ``external-id``...).
    datatype: str


@dataclass(frozen=True, kw_only=True)
class Triple:
    subject: str
    property: str
    value: str
    #: Line number in the TSV file (1-based), for error messages.
    line: int


@dataclass(frozen=True)
class Dataset:
    items: dict[str, ItemRecord]
    properties: dict[str, PropertyRecord]
    triples: list[Triple]


def read_item_names(data_dir: Path) -> dict[str, list[str]]:
    """The item names file as it is: ``{"Q123": ["label", "other label", ...]}`` (crawl placeholders included)."""
    path = data_dir / ITEM_LABELS
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DataError(f'{path}: expected an object {{"Q123": ["label", ...], ...}}')
    return data


def read_property_entries(data_dir: Path) -> list[dict[str, Any]]:
    """The properties file as it is: ``[{"id", "label", "description", "aliases", "datatype"}, ...]``."""
    path = data_dir / PROPERTIES
    data = _read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of properties")
    return data


def read_statements(data_dir: Path) -> Iterator[tuple[str, str, str, int]]:
    """The statements file as it is: ``(subject, property, value, line)`` for each non-blank line."""
    path = data_dir / TRIPLES
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) != 3:
                raise DataError(f"{path}:{n}: expected subject<TAB>property<TAB>value, got {line.strip()!r}")
            subject, property, value = (x.strip() for x in fields)
            yield subject, property, value, n


def load(data_dir: Path) -> Dataset:
    """Reads and checks the data folder; any problem is a :class:`DataError` naming the file."""
    check_data_dir(data_dir)
    properties = dict(_properties(data_dir))
    items = dict(_items(data_dir))
    triples = list(_triples(data_dir, properties))
    return Dataset(items, properties, triples)


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise DataError(f"cannot read {path} ({err}); set KIFQA_DATA_DIR") from err
    try:
        return json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path} is not valid JSON: {err}") from err


def _names(names: list[str]) -> tuple[str, tuple[str, ...]]:
    """The label and the aliases of a list of names (placeholders, blanks and duplicates dropped)."""
    kept: dict[str, str] = {}
    for name in names:
        name = spaced(name)
        key = index_key(name)
        if key and key != NO_LABEL and key not in kept:
            kept[key] = name
    values = list(kept.values())
    return (values[0], tuple(values[1:])) if values else ("", ())


def _items(data_dir: Path) -> Iterator[tuple[str, ItemRecord]]:
    path = data_dir / ITEM_LABELS
    for id, names in read_item_names(data_dir).items():
        if not _ITEM_ID.fullmatch(id) or not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise DataError(f'{path}: entry {id!r} is not "Q<number>": [strings]')
        label, aliases = _names(names)
        yield id, ItemRecord(id=id, label=label, aliases=aliases)


def _properties(data_dir: Path) -> Iterator[tuple[str, PropertyRecord]]:
    path = data_dir / PROPERTIES
    for i, entry in enumerate(read_property_entries(data_dir)):
        try:
            id, datatype = entry["id"], entry["datatype"]
            names = [entry.get("label") or "", *(entry.get("aliases") or [])]
            description = entry.get("description") or ""
        except (TypeError, KeyError) as err:
            raise DataError(f"{path}: property #{i} lacks {err}") from err
        if not isinstance(id, str) or not _PROPERTY_ID.fullmatch(id):
            raise DataError(f"{path}: property #{i} has a bad id {id!r}")
        if datatype not in WIKIBASE_TYPES:
            raise DataError(f"{path}: property {id} has an unknown datatype {datatype!r}")
        if not all(isinstance(n, str) for n in names) or not isinstance(description, str):
            raise DataError(f"{path}: property {id} has non-string names")
        label, aliases = _names(names)
        yield id, PropertyRecord(id=id, label=label, aliases=aliases, description=spaced(description),
                                 datatype=datatype)


def _triples(data_dir: Path, properties: dict[str, PropertyRecord]) -> Iterator[Triple]:
    path = data_dir / TRIPLES
    for subject, property, value, n in read_statements(data_dir):
        if not (_ITEM_ID.fullmatch(subject) or _PROPERTY_ID.fullmatch(subject)):
            raise DataError(f"{path}:{n}: subject {subject!r} is not a Wikidata item or property id")
        if property not in properties:
            raise DataError(f"{path}:{n}: property {property!r} is not in {PROPERTIES}")
        yield Triple(subject=subject, property=property, value=value, line=n)
