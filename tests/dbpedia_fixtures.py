"""Fixtures of the DBpedia-encoded base: its build, a real Virtuoso serving it (started once per session; the
tests are skipped if Virtuoso is not installed) and the knowledge base over that server."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator

import pytest

from kifqa.config import Settings
from kifqa.kb import dbpedia
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.spec import open_kb
from kifqa.kb.virtuoso import VirtuosoServer

#: Marks a test that starts Virtuoso itself.
needs_virtuoso = pytest.mark.skipif(shutil.which("virtuoso-t") is None,
                                    reason="Virtuoso is not installed (apt-get install virtuoso-opensource-7)")


@pytest.fixture(scope="session")
def dbpedia_build(settings: Settings) -> dbpedia.DBpediaBuild:
    """The DBpedia-encoded base built from the real data (once; reruns reuse it)."""
    return dbpedia.build(settings)[0]


@pytest.fixture(scope="session")
def virtuoso_server(dbpedia_build: dbpedia.DBpediaBuild) -> Iterator[VirtuosoServer]:
    """A real Virtuoso on a free port with the DBpedia-encoded base loaded."""
    if shutil.which("virtuoso-t") is None:
        pytest.skip("Virtuoso is not installed (apt-get install virtuoso-opensource-7)")
    with VirtuosoServer(dbpedia_build.rdf_path, graph=dbpedia.GRAPH) as server:
        print(f"\nVirtuoso: up in {server.startup_s:.1f} s, {server.triples:,} triples loaded in {server.load_s:.1f} s")
        yield server


@pytest.fixture(scope="session")
def dbpedia_kb(settings: Settings, virtuoso_server: VirtuosoServer) -> Iterator[KifKnowledgeBase]:
    """The knowledge base behind :func:`virtuoso_server` (``local-dbpedia-server:PORT``)."""
    kb = open_kb(f"local-dbpedia-server:{virtuoso_server.port}", settings)
    yield kb
    asyncio.run(kb.aclose())
