"""The Oxigraph server helper: starts on a free port, answers SPARQL, stops, and fails clearly."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from kifqa.errors import KBError
from kifqa.kb.build import BuiltKB
from kifqa.kb.server import OxigraphServer


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, params={"query": "ASK { ?s ?p ?o }"}, timeout=2).json()["boolean"] is True
    except httpx.TransportError:
        return False


def test_starts_answers_and_stops(built_kb: BuiltKB) -> None:
    with OxigraphServer(built_kb.store_dir) as server:
        assert server.url.startswith("http://127.0.0.1:") and _answers(server.url)
        process = server._process
    assert process is not None and process.poll() is not None
    assert not _answers(server.url)


def test_the_session_server_serves_the_built_kb(oxigraph_server: str) -> None:
    query = "SELECT ?label WHERE { <http://www.wikidata.org/entity/Q5950> <http://www.w3.org/2000/01/rdf-schema#label> ?label }"
    answer = httpx.get(oxigraph_server, params={"query": query}, timeout=10,
                       headers={"Accept": "application/sparql-results+json"})
    assert answer.status_code == 200 and oxigraph_server.startswith("http://127.0.0.1:")
    assert [row["label"] for row in answer.json()["results"]["bindings"]] == [
        {"type": "literal", "value": "James Brown", "xml:lang": "en"}]


def test_busy_port_is_a_clear_error(built_kb: BuiltKB) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(KBError, match=f"port {s.getsockname()[1]} .* already in use"):
            OxigraphServer(built_kb.store_dir, port=s.getsockname()[1]).start()


def test_missing_store_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KBError, match="no Oxigraph store.*kifqa kb build"):
        OxigraphServer(tmp_path / "nothing").start()


def test_unusable_store_reports_the_server_output(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "CURRENT").write_text("garbage")
    with pytest.raises(KBError, match="oxigraph server did not answer.*exited with status"):
        OxigraphServer(tmp_path / "bad", startup_timeout_s=10).start()
