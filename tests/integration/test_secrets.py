"""Credentials in URLs stay secret: a real ``kifqa run`` (a Ray job) against a local OpenAI-compatible
server and the Oxigraph endpoint, both addressed with a password in the URL, some of the model's
requests failing; the passwords are sent (as HTTP basic auth) but appear in no file of the run folder,
no line the command or Ray logs, and not in the report."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from kifqa.cli.options import fail
from kifqa.config import LLMResilience
from kifqa.errors import ConfigError, KBError
from kifqa.kb.spec import open_kb
from kifqa.llm.base import ChatRequest, Message
from kifqa.llm.openai_compat import OpenAILLM
from kifqa.redact import redact
from tests.conftest import REPO
from tests.fault_proxy import FaultProxy
from tests.llm_server import ChatServer, Fault, echo_reply

KIFQA = str(Path(sys.executable).with_name("kifqa"))
LLM_PASSWORD, KB_PASSWORD = "llm-s3cret-pw", "kb-s3cret-pw"
SECRETS = (LLM_PASSWORD, KB_PASSWORD)


def test_redact_masks_user_information_and_secret_parameters() -> None:
    assert redact("GET https://user:pw@host.org/v1?x=1&api_key=abc&key=k#f failed") == \
        "GET https://***@host.org/v1?x=1&api_key=***&key=***#f failed"
    assert redact("sparql+wikidata:http://u:p@127.0.0.1:7878/sparql") == "sparql+wikidata:http://***@127.0.0.1:7878/sparql"
    assert redact("mail me@host.org, see https://host.org/a@b?q=1") == "mail me@host.org, see https://host.org/a@b?q=1"


def test_a_failing_command_prints_no_password() -> None:
    failure = fail(ConfigError(f"the model server http://u:{LLM_PASSWORD}@127.0.0.1:9/v1 cannot be reached"))
    assert failure.message == "ConfigError: the model server http://***@127.0.0.1:9/v1 cannot be reached"


def secrets_in(path: Path) -> list[str]:
    """The secrets found in a file (a Parquet file's rows, any other file's bytes)."""
    if path.suffix == ".parquet":
        text = json.dumps(pq.read_table(path).to_pylist(), default=str)
    else:
        text = path.read_bytes().decode("utf-8", "replace")
    return [s for s in SECRETS if s in text]


@pytest.mark.slow
def test_a_password_in_base_url_reaches_no_file_log_or_report(settings, built_kb, oxigraph_server, tmp_path) -> None:
    questions = ["who wrote dracula", "where was sasha vujačić born", "what genre is the album thriller",
                 "what is the nationality of kim jong-un"]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(questions)))
    kb_url = oxigraph_server.replace("http://", f"http://kbuser:{KB_PASSWORD}@")
    with ChatServer() as server, tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as ray_tmp:
        warm_up = json.dumps(echo_reply({"messages": [{"role": "user", "content": "hi"}]}))
        server.fail(Fault(body=warm_up), Fault(status=400))
        llm_url = server.url.replace("http://", f"http://llmuser:{LLM_PASSWORD}@")
        config = tmp_path / "run.yaml"
        config.write_text(yaml.safe_dump({
            "data_dir": str(settings.data_dir), "cache_dir": str(settings.cache_dir),
            "kb": {"spec": f"sparql+wikidata:{kb_url}"},
            "llm": {"backend": "openai", "model": "echo", "base_url": llm_url, "cache": None,
                    "resilience": {"retries": 0}},
            "batch": {"shard_size": 2, "max_tasks": 1, "kb_cache": False, "llm_actor_cpus": 0}}))
        out = tmp_path / "out"
        env = {**os.environ, "RAY_TMPDIR": ray_tmp}
        done = subprocess.run([KIFQA, "run", str(corpus), "--out", str(out), "--config", str(config),
                               "--no-progress"], capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
        report = subprocess.run([KIFQA, "report", str(out), "--out", str(tmp_path / "report.html")],
                                capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
        logs = [p for p in Path(ray_tmp).rglob("*") if p.is_file() and not p.is_symlink() and p.suffix in
                {".log", ".out", ".err", ".json", ".txt"}]
        leaked_logs = {str(p): found for p in logs if (found := secrets_in(p))}
        sent = [h.get("authorization", "") for h in server.headers]
    assert report.returncode == 0, report.stderr
    traces = pq.read_table(out / "traces").to_pylist()
    assert len(traces) == len(questions), done.stdout + done.stderr
    errors = [t["error"] for t in traces if t["error"]]
    assert any("http://***@127.0.0.1" in e and "HTTP 400" in e for e in errors), \
        "a trace error names the model server, its password masked"
    assert sent and all(h == "Basic " + base64.b64encode(f"llmuser:{LLM_PASSWORD}".encode()).decode() for h in sent)
    assert len(logs) > 5, "Ray's logs were read"
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"manifest.json"} and any(p.suffix == ".parquet" for p in files)
    assert {str(p): found for p in files if (found := secrets_in(p))} == {}
    assert secrets_in(tmp_path / "report.html") == []
    assert [s for s in SECRETS if s in done.stdout + done.stderr + report.stdout + report.stderr] == []
    assert leaked_logs == {}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["llm"]["base_url"].startswith("http://***@127.0.0.1")
    assert manifest["config"]["kb"]["spec"].startswith("sparql+wikidata:http://***@127.0.0.1")


def test_model_and_kb_errors_name_their_endpoints_with_the_password_masked(settings, oxigraph_server) -> None:
    """The errors a model server's 400 and 503s and a KB's rejected query give, in process (fast)."""
    with ChatServer() as server:
        llm = OpenAILLM(model="m", base_url=server.url.replace("http://", f"http://u:{LLM_PASSWORD}@"),
                        resilience=LLMResilience(retries=1, backoff_s=0.01))
        server.fail(Fault(status=400), Fault(status=503), Fault(status=503))
        bad, unavailable = llm.generate([ask("a")])[0], llm.generate([ask("b")])[0]
    for error in (bad.error, unavailable.error):
        assert error and "http://***@127.0.0.1" in error and LLM_PASSWORD not in error, error
    with FaultProxy(oxigraph_server) as proxy:
        proxy.poison = "<http://www.wikidata.org/entity/Q42>"
        kb = open_kb(f"sparql+wikidata:{proxy.url.replace('http://', f'http://u:{KB_PASSWORD}@')}",
                     settings.override(kb={"resilience": {"retries": 0}}))
        try:
            with pytest.raises(KBError) as rejected:
                asyncio.run(kb.facts("Q42", "P19", "forward"))
        finally:
            asyncio.run(kb.aclose())
    assert "***@127.0.0.1" in str(rejected.value) and KB_PASSWORD not in str(rejected.value), rejected.value


def ask(text: str) -> ChatRequest:
    return ChatRequest(messages=(Message("user", text),), max_tokens=8)
