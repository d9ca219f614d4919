"""Before its first shard a job checks that its model server and KB endpoint are there: a wrong address
fails ``kifqa run`` in seconds, naming it; a server that is there but failing is left to the outage logic."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kifqa.batch.preflight import check_endpoints
from kifqa.config import Settings
from kifqa.errors import ConfigError
from kifqa.kb.build import BuiltKB
from tests.conftest import REPO, TEST_CACHE
from tests.fault_proxy import FaultProxy
from tests.llm_server import ChatServer


def free_port() -> int:
    """A local port where nothing listens (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kifqa_run(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``kifqa run`` on a one-question corpus in a subprocess, and the seconds it took."""
    corpus = tmp_path / "q.jsonl"
    corpus.write_text('{"question": "where was james brown born"}\n')
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", "from kifqa.cli import main; main()", "run", str(corpus),
                           "--out", str(tmp_path / "out"), "--no-progress", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=os.environ | {"KIFQA_CACHE_DIR": str(TEST_CACHE)} | env)
    return done, time.monotonic() - start


@pytest.mark.timeout(90)
def test_a_wrong_model_address_fails_the_job_in_seconds_naming_it(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    done, seconds = kifqa_run(tmp_path, KIFQA_LLM__BACKEND="openai", KIFQA_LLM__BASE_URL=url)
    assert done.returncode == 2 and seconds < 30
    assert done.stderr.strip().splitlines() == [
        f"Error: ConfigError: the model server {url} (llm.base_url) cannot be reached: connection refused"]


@pytest.mark.timeout(90)
def test_a_wrong_kb_address_fails_the_job_in_seconds_naming_it(built_kb: BuiltKB, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/sparql"
    done, seconds = kifqa_run(tmp_path, "--kb", f"sparql+wikidata:{url}", "--model", "gold",
                              KIFQA_LLM__BACKEND="gold")
    assert done.returncode == 2 and seconds < 30
    assert done.stderr.strip().splitlines() == [
        f"Error: ConfigError: the KB endpoint {url} (kb.spec sparql+wikidata:{url}) cannot be reached: "
        "connection refused"]


def test_servers_that_are_there_pass_even_when_they_fail(settings: Settings, built_kb: BuiltKB,
                                                          oxigraph_server: str) -> None:
    with ChatServer() as chat, FaultProxy(oxigraph_server) as down:
        down.down = True  # takes the connection, then resets it: an outage, which the job waits out
        for kb in (oxigraph_server, down.url):
            job = settings.override(kb={"spec": f"sparql+wikidata:{kb}"},
                                    llm={"backend": "openai", "base_url": chat.url})
            check_endpoints(job)
        assert chat.requests == []  # GET /models: the chat server answers 404, which passes
    assert down.counts["reset"] == 1


def test_only_the_endpoints_that_are_used_are_checked(settings: Settings, built_kb: BuiltKB) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    wrong = settings.override(kb={"spec": f"sparql+wikidata:{nowhere}/sparql"},
                              llm={"backend": "openai", "base_url": f"{nowhere}/v1"})
    check_endpoints(wrong, kb=False, llm=False)  # replaced backends (a test's doubles) are not checked
    with pytest.raises(ConfigError, match=f"^the KB endpoint {nowhere}/sparql .*: connection refused$"):
        check_endpoints(wrong, llm=False)
    check_endpoints(settings.override(llm={"backend": "local", "base_url": f"{nowhere}/v1"}))  # local: no URL


def test_the_job_checks_before_it_reads_its_corpus(settings: Settings, tmp_path: Path) -> None:
    """A wrong environment is said first, before the corpus (here none) is read and hashed."""
    from kifqa.batch import run_job

    url = f"http://127.0.0.1:{free_port()}/v1"
    job = settings.override(llm={"backend": "openai", "base_url": url})
    with pytest.raises(ConfigError, match=f"^the model server {url} \\(llm.base_url\\) cannot be reached"):
        run_job(job, tmp_path / "no-corpus.jsonl", tmp_path / "out", progress=False)


@pytest.mark.parametrize(("spec", "build"), [("local-hard", "kifqa kb build --hard"),
                                             (f"local-server:{free_port()}", "kifqa kb build")])
def test_a_local_build_that_is_missing_is_one_problem(settings: Settings, tmp_path: Path, spec: str,
                                                      build: str) -> None:
    """The check says what to build, once, for the in-process base and for a server's label index alike."""
    from kifqa.batch.preflight import preflight

    job = settings.override(kb={"spec": spec}, cache_dir=tmp_path / "empty-cache")
    problems = preflight(job, llm=False, pipeline=False)
    assert [p.check for p in problems] == ["kb"] and problems[0].message.endswith(f"run `{build}`")
