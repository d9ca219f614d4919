"""``kifqa kb build --encoding dbpedia``, ``kifqa kb serve --engine virtuoso`` and the query commands on the
``local-dbpedia-server`` spec, end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from kifqa.cli.kb import kb
from kifqa.config import Settings
from kifqa.kb import dbpedia
from kifqa.kb.server import free_port
from kifqa.kb.virtuoso import VirtuosoServer
from tests.dbpedia_fixtures import needs_virtuoso

SASHA, BIRTH = dbpedia.DBR + "Sasha_Vujačić", dbpedia.DBO + "birthPlace"


@pytest.fixture
def env(settings: Settings) -> dict[str, str]:
    return {"KIFQA_DATA_DIR": str(settings.data_dir), "KIFQA_CACHE_DIR": str(settings.cache_dir)}


@pytest.fixture
def run(env: dict[str, str], virtuoso_server: VirtuosoServer) -> Callable[..., Result]:
    spec = f"local-dbpedia-server:{virtuoso_server.port}"
    return lambda *args: CliRunner().invoke(kb, [*args, "--kb", spec], env=env)


def test_build_is_up_to_date(env: dict[str, str], dbpedia_build: dbpedia.DBpediaBuild) -> None:
    result = CliRunner().invoke(kb, ["build", "--encoding", "dbpedia"], env=env)
    assert result.exit_code == 0, result.output
    assert f"up to date: {dbpedia_build.root}" in result.output
    counts = dbpedia_build.manifest["counts"]
    assert f"{counts['statements']:,} of 27,727 statements converted" in result.output
    assert f"({counts['resources_qualified_by_kind']:,} disambiguated by kind, " \
        f"{counts['resources_qualified_by_id']:,} by Wikidata id)" in result.output


def test_search_filter_and_properties(run: Callable[..., Result]) -> None:
    search = run("search", "sasha vujacic", "--limit", "1")
    assert search.exit_code == 0, search.output
    assert SASHA in search.output
    found = run("filter", "--subject", SASHA, "--property", BIRTH, "--sparql")
    assert found.exit_code == 0, found.output
    assert f"{SASHA} (Sasha Vujačić)  {BIRTH} (birth place)  {dbpedia.DBR}Maribor (Maribor)" in found.output
    assert "owl#Thing" in found.output
    uses = run("properties", SASHA, "--json")
    assert uses.exit_code == 0, uses.output
    found_uses = json.loads(uses.output)
    assert [(u["property"]["id"], u["direction"]) for u in found_uses["uses"]] == [(BIRTH, "forward")]
    assert found_uses["truncated"] is False
    info = run("info", "--json")
    assert json.loads(info.output)["endpoints"]["store"] == "kifqa-virtuoso"


@needs_virtuoso
def test_serve_virtuoso_answers_and_stops_its_server(env: dict[str, str],
                                                    dbpedia_build: dbpedia.DBpediaBuild) -> None:
    port = free_port()
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "kifqa"), "kb", "serve", "--engine", "virtuoso", "--port", str(port)],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        lines = []
        while not any("serving at" in line for line in lines):
            line = process.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        assert f"http://127.0.0.1:{port}/sparql" in lines[-1] and "triples loaded in" in lines[-1]
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        answer = httpx.post(f"http://127.0.0.1:{port}/sparql", data={"query": f"SELECT ?o {{ <{SASHA}> <{BIRTH}> ?o }}"},
                            headers={"Accept": "application/sparql-results+json"}, timeout=10)
        assert answer.json()["results"]["bindings"] == [{"o": {"type": "uri", "value": dbpedia.DBR + "Maribor"}}]
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children and not any(Path(f"/proc/{pid}").exists() for pid in children)


@needs_virtuoso
@pytest.mark.slow  # the real model; the default suite runs the pipeline on Virtuoso with a scripted one (test_kb_virtuoso.py)
@pytest.mark.parametrize("examples", ["fixed", "retrieved"])
def test_kifqa_ask_on_local_dbpedia_with_the_real_model(env: dict[str, str], dbpedia_build: dbpedia.DBpediaBuild,
                                                       examples: str) -> None:
    """The unchanged pipeline and the real 0.5B model on a Virtuoso that the command starts and stops itself; with
    examples retrieved from the DBpedia pool (its embedding costs a minute on a fresh cache) or the fixed block."""
    pytest.importorskip("xllamacpp", reason="the local backend needs xllamacpp")
    runs = set(Path(tempfile.gettempdir()).glob("kifqa-virtuoso-*"))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "kifqa"), "ask", "--json", "--kb", "local-dbpedia",
         "--model", "qwen2.5-coder-0.5b", "--examples", examples, "where was sasha vujačić born"],
        env={**os.environ, **env, "KIFQA_LLM__CACHE": ""}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert [(a["subject"], a["property"], a["answer"]) for a in result["answers"]] == [
        (SASHA, BIRTH, dbpedia.DBR + "Maribor")]
    assert result["trace"]["error"] is None and result["trace"]["kb"] == "local-dbpedia"
    assert set(Path(tempfile.gettempdir()).glob("kifqa-virtuoso-*")) <= runs, "its Virtuoso is gone"
