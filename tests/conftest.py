"""Shared fixtures: the real data folder, settings, the built knowledge base, an in-process KB, a running
Oxigraph server and a two-node Ray cluster. Data problems fail the tests with a clear message; nothing is skipped silently.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kifqa.config import DEFAULT_DATA_DIR, ExamplesSettings, PipelineSettings, Settings
from kifqa.kb.build import BuiltKB, build
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.server import OxigraphServer
from kifqa.kb.spec import open_kb
from tests.dbpedia_fixtures import dbpedia_build, dbpedia_kb, virtuoso_server  # noqa: F401
from tests.ray_cluster import two_nodes  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
#: Repo-local cache of the tests: reruns reuse the knowledge-base build.
TEST_CACHE = REPO / ".cache" / "tests"
#: The tiny data has no train split to draw a pool from, and the cassettes hold fixed-example prompts.
FIXED_EXAMPLES = ExamplesSettings(mode="fixed")
#: The fixed examples show none of the dataset conventions the pool's priors count (kifqa/examples/priors.py), and
#: the cassettes were recorded with every rule written for one firing: the tests' settings fire them whatever the
#: pool (the priors have their own tests: test_pipeline_priors.py, test_pipeline.py).
EVERY_CONVENTION = PipelineSettings(prior_share=0.0, prior_least=0)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared data folder (``KIFQA_DATA_DIR`` or ``../shared/data``)."""
    path = Path(os.environ.get("KIFQA_DATA_DIR") or DEFAULT_DATA_DIR)
    if not (path / "simplequestions-wikidata" / "kb_triples.tsv").is_file():
        pytest.fail(f"no shared data in {path}: set KIFQA_DATA_DIR to the folder with simplequestions-wikidata/ "
                    "and wikidata/", pytrace=False)
    return path


@pytest.fixture(scope="session")
def settings(data_dir: Path) -> Settings:
    """Settings over the real data, caching under ``<repo>/.cache/tests``, with the fixed examples the
    replay cassettes were recorded with (the clustered default has its own tests: test_examples.py,
    test_pipeline_clustered.py) and every convention rule firing (:data:`EVERY_CONVENTION`)."""
    return Settings(data_dir=data_dir, cache_dir=TEST_CACHE, examples=FIXED_EXAMPLES, pipeline=EVERY_CONVENTION)


@pytest.fixture(scope="session")
def built_kb(settings: Settings) -> BuiltKB:
    """The knowledge base built from the real data (once; reruns reuse it)."""
    return build(settings)[0]


@pytest.fixture(scope="session")
def local_kb(settings: Settings, built_kb: BuiltKB) -> Iterator[KifKnowledgeBase]:
    """The in-process knowledge base (``local`` spec); usable from any event loop."""
    kb = open_kb("local", settings)
    yield kb
    asyncio.run(kb.aclose())


@pytest.fixture(scope="session")
def oxigraph_server(built_kb: BuiltKB) -> Iterator[str]:
    """The URL of a real ``oxigraph serve-read-only`` over the built store, on a free local port."""
    with OxigraphServer(built_kb.store_dir) as server:
        yield server.url


@pytest.fixture(scope="session")
def server_kb(settings: Settings, oxigraph_server: str) -> Iterator[KifKnowledgeBase]:
    """The knowledge base behind :func:`oxigraph_server` (KIF ``wikidata-sparql`` + local search)."""
    kb = open_kb(f"sparql+wikidata:{oxigraph_server}", settings)
    yield kb
    asyncio.run(kb.aclose())


#: A tiny dataset in the shape of the shared data folder, one statement per supported datatype.
TINY: dict[str, Any] = {
    "items": {"Q1": ["Alpha Centauri", "Alpha Cen"], "Q2": ["Beyoncé"], "Q3": ["Alpha"], "Q4": ["Gamma", "Alpha"],
              "Q5": ["No label defined"]},
    "properties": [
        {"id": "P10", "label": "located in", "description": "where it is", "aliases": ["in"],
         "datatype": "wikibase-item"},
        {"id": "P11", "label": "catalogue code", "description": "an identifier", "aliases": None,
         "datatype": "external-id"},
        {"id": "P12", "label": "mass", "description": None, "aliases": ["weight"], "datatype": "quantity"},
        {"id": "P13", "label": "discovered", "description": "date of discovery", "aliases": [], "datatype": "time"},
        {"id": "P14", "label": "website", "description": "", "aliases": [], "datatype": "url"},
        {"id": "P15", "label": "unused", "description": "no statement uses it", "aliases": [],
         "datatype": "string"},
    ],
    "triples": [("Q1", "P10", "Q3"), ("Q2", "P10", "Q3"), ("Q1", "P11", "HIP 71683"), ("Q1", "P12", "2.18"),
                ("Q1", "P13", "1689-12-01"), ("Q1", "P14", "https://example.org/alpha"), ("Q5", "P10", "Q1")],
}


def _write_data_dir(root: Path, data: dict[str, Any]) -> Path:
    (root / "wikidata").mkdir(parents=True, exist_ok=True)
    (root / "simplequestions-wikidata").mkdir(exist_ok=True)
    (root / "wikidata" / "entity_labels_en.json").write_text(json.dumps(data["items"]))
    (root / "wikidata" / "properties_en.json").write_text(json.dumps(data["properties"]))
    (root / "simplequestions-wikidata" / "kb_triples.tsv").write_text(
        "".join("\t".join(t) + "\n" for t in data["triples"]))
    return root


@pytest.fixture
def tiny_data() -> dict[str, Any]:
    """A fresh copy of :data:`TINY` to modify."""
    return copy.deepcopy(TINY)


@pytest.fixture
def tiny_data_dir(tmp_path: Path) -> Callable[..., Path]:
    """Writes a data folder (default: :data:`TINY`) under ``tmp_path/name`` and returns it."""

    def make(data: dict[str, Any] = TINY, name: str = "data") -> Path:
        return _write_data_dir(tmp_path / name, data)

    return make


@pytest.fixture
def tiny_settings(tmp_path: Path, tiny_data_dir: Callable[..., Path]) -> Callable[..., Settings]:
    """Makes settings over a tiny data folder (see :func:`tiny_data_dir`) with a cache in ``tmp_path``."""

    def make(data: dict[str, Any] = TINY, name: str = "data") -> Settings:
        return Settings(data_dir=tiny_data_dir(data, name), cache_dir=tmp_path / "cache", examples=FIXED_EXAMPLES)

    return make


@pytest.fixture
def flags(tmp_path: Path) -> Path:
    """An empty folder where a test's fake model and KB find the flags that make them stall or fail."""
    folder = tmp_path / "flags"
    folder.mkdir()
    return folder
