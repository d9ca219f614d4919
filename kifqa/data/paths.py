"""Where each source lives in the data folder, and a check that the folder is the right one."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from kifqa.errors import DataError

#: The statements of the local base: ``subject<TAB>property<TAB>value``.
TRIPLES = "simplequestions-wikidata/kb_triples.tsv"
#: English names of the items: ``{"Q123": ["label", "other label", ...]}``.
ITEM_LABELS = "wikidata/entity_labels_en.json"
#: All Wikidata properties: ``[{"id", "label", "description", "aliases", "datatype"}]``.
PROPERTIES = "wikidata/properties_en.json"
#: The Wikidata inputs of the local base.
WIKIDATA_INPUTS = (TRIPLES, ITEM_LABELS, PROPERTIES)
#: The DBpedia ontology (Turtle).
ONTOLOGY = "dbpedia/ontology.ttl"
#: SimpleQuestions-Wikidata splits: ``topic<TAB>property<TAB>answer<TAB>question``.
SQWD_SPLITS = ("train", "valid")


def sqwd(split: str) -> str:
    """The file of a SimpleQuestions-Wikidata split (``train``, ``valid``)."""
    return f"simplequestions-wikidata/{split}_answerable.txt"


def sdbqa(split: str) -> str:
    """The file of a SimpleDBpediaQA split (``valid``)."""
    return f"simpledbpediaqa/{split}.json"


def check_data_dir(data_dir: Path, names: Iterable[str] = WIKIDATA_INPUTS) -> None:
    """Raises :class:`DataError` unless ``data_dir`` holds every file of ``names``."""
    if not data_dir.is_dir():
        raise DataError(
            f"data folder {data_dir} does not exist; set KIFQA_DATA_DIR to the folder that holds "
            "simplequestions-wikidata/ and wikidata/ (see shared/data/README.md)"
        )
    for name in names:
        if not (data_dir / name).is_file():
            raise DataError(f"{data_dir / name} is missing; is KIFQA_DATA_DIR={data_dir} the right data folder?")


def inputs_digest(data_dir: Path, version: str, names: Iterable[str] = WIKIDATA_INPUTS) -> str:
    """A hash of ``version`` and the content of the files ``names`` (the key of a build made from them)."""
    names = tuple(names)
    check_data_dir(data_dir, names)
    digest = hashlib.sha256(version.encode())
    for name in names:
        digest.update(f"\0{name}\0".encode())
        with open(data_dir / name, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:16]
