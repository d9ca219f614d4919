"""Reading and checking the offline Wikidata data (labels, properties, statements) of the data folder."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kifqa.errors import DataError

TRIPLES = "simplequestions-wikidata/kb_triples.tsv"
ITEM_LABELS = "wikidata/entity_labels_en.json"
PROPERTIES = "wikidata/properties_en.json"
#: The input files of the knowledge base, relative to the data folder.
INPUTS = (TRIPLES, ITEM_LABELS, PROPERTIES)

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


@dataclass(frozen=True)
class ItemRecord:
    id: str
    label: str
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class PropertyRecord:
    id: str
    label: str
    aliases: tuple[str, ...]
    description: str
    #: Wikidata datatype name (``wikibase-item``, ``external-id``...).
    datatype: str


@dataclass(frozen=True)
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


def normalize(text: str) -> str:
    """Case-folded text without diacritics and with single spaces: the key of exact matches."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())


def check_data_dir(data_dir: Path) -> None:
    """Raises :class:`DataError` unless ``data_dir`` holds every input file."""
    if not data_dir.is_dir():
        raise DataError(
            f"data folder {data_dir} does not exist; set KIFQA_DATA_DIR to the folder that holds "
            "simplequestions-wikidata/ and wikidata/ (see shared/data/README.md)"
        )
    for name in INPUTS:
        if not (data_dir / name).is_file():
            raise DataError(f"{data_dir / name} is missing; is KIFQA_DATA_DIR={data_dir} the right data folder?")


def inputs_digest(data_dir: Path, version: str) -> str:
    """A hash of the builder's ``version`` and the content of every input file."""
    check_data_dir(data_dir)
    digest = hashlib.sha256(version.encode())
    for name in INPUTS:
        digest.update(f"\0{name}\0".encode())
        with open(data_dir / name, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def load(data_dir: Path) -> Dataset:
    """Reads and checks the data folder; any problem is a :class:`DataError` naming the file."""
    check_data_dir(data_dir)
    properties = dict(_read_properties(data_dir / PROPERTIES))
    items = dict(_read_items(data_dir / ITEM_LABELS))
    triples = list(_read_triples(data_dir / TRIPLES, properties))
    return Dataset(items, properties, triples)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path} is not valid JSON: {err}") from err


def _names(names: list[str]) -> tuple[str, tuple[str, ...]]:
    """The label and the aliases of a list of names (placeholders, blanks and duplicates dropped)."""
    kept: dict[str, str] = {}
    for name in names:
        name = " ".join(name.split())
        key = normalize(name)
        if key and key != NO_LABEL and key not in kept:
            kept[key] = name
    values = list(kept.values())
    return (values[0], tuple(values[1:])) if values else ("", ())


def _read_items(path: Path) -> Iterator[tuple[str, ItemRecord]]:
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DataError(f'{path}: expected an object {{"Q123": ["label", ...], ...}}')
    for id, names in data.items():
        if not _ITEM_ID.fullmatch(id) or not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise DataError(f'{path}: entry {id!r} is not "Q<number>": [strings]')
        label, aliases = _names(names)
        yield id, ItemRecord(id, label, aliases)


def _read_properties(path: Path) -> Iterator[tuple[str, PropertyRecord]]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of properties")
    for i, entry in enumerate(data):
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
        yield id, PropertyRecord(id, label, aliases, " ".join(description.split()), datatype)


def _read_triples(path: Path, properties: dict[str, PropertyRecord]) -> Iterator[Triple]:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) != 3:
                raise DataError(f"{path}:{n}: expected subject<TAB>property<TAB>value, got {line.strip()!r}")
            subject, property, value = (x.strip() for x in fields)
            if not (_ITEM_ID.fullmatch(subject) or _PROPERTY_ID.fullmatch(subject)):
                raise DataError(f"{path}:{n}: subject {subject!r} is not a Wikidata item or property id")
            if property not in properties:
                raise DataError(f"{path}:{n}: property {property!r} is not in {PROPERTIES}")
            yield Triple(subject, property, value, n)
