"""``kifqa bench standins --hard``: the Wikidata stand-ins over the hard base, as a user starts them for the quality
table over public-over-hard (``--write-config``, then ``kifqa eval --config``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from kifqa.config import Settings
from kifqa.kb.build import build
from kifqa.kb.hard import DISTRACTOR_LABELS


@pytest.mark.slow  # builds the hard base from the real data where it is not built (about a minute)
def test_standins_hard_serve_the_hard_base_and_its_homonyms(settings: Settings, tmp_path: Path) -> None:
    hard = build(settings, hard=True)[0]
    homonyms = json.loads((hard.root / DISTRACTOR_LABELS).read_text())
    id, names = next(iter(sorted(homonyms.items())))
    written = tmp_path / "wdh.yaml"
    env = {**os.environ, "KIFQA_DATA_DIR": str(settings.data_dir), "KIFQA_CACHE_DIR": str(settings.cache_dir)}
    server = subprocess.Popen([sys.executable, "-c", "from kifqa.cli import main; main()", "bench", "standins", "--hard", "--latency-s", "0",
                               "--write-config", str(written)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not written.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        endpoints = yaml.safe_load(written.read_text())["kb"]["endpoints"]
        params = {"format": "json", "maxlag": "5", "language": "en", "limit": "50"}
        found = httpx.get(endpoints["www.wikidata.org"], params={**params, "action": "wbsearchentities",
                                                                 "search": names[0]}).json()
        rows = httpx.post(endpoints["query.wikidata.org"], data={
            "query": f"SELECT ?p WHERE {{ <http://www.wikidata.org/entity/{id}> ?p ?o }} LIMIT 1"},
            headers={"Accept": "application/sparql-results+json"}).json()
    finally:
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=60)
    # The API's search finds the hard base's homonym by its name, WDQS has its statements.
    assert id in {hit["id"] for hit in found["search"]}
    assert rows["results"]["bindings"]
    assert server.returncode == 0
    assert json.loads(out)["www.wikidata.org"]["by_action"] == {"wbsearchentities": 1}
