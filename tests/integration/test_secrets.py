"""Credentials in URLs stay secret: a real ``kifqa run`` (a Ray job) against a local OpenAI-compatible
server and the Oxigraph endpoint, both addressed with a password in the URL, some of the model's
requests failing; the passwords are sent (as HTTP basic auth) but appear in no file of the run folder,
no line the command or Ray logs, and not in the report."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from kifqa.cli.options import fail
from kifqa.config import LLMResilience
from kifqa.errors import ConfigError, KBError
from kifqa.eval.datasets import load_sqwd
from kifqa.kb.spec import open_kb
from kifqa.llm.base import ChatRequest, Message
from kifqa.llm.openai_compat import OpenAILLM
from kifqa.redact import redact, redact_data
from kifqa.runs import RunFolder
from tests.conftest import REPO, TEST_CACHE
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


def test_redact_masks_passwords_with_an_at_sign_and_every_secret_looking_parameter() -> None:
    assert redact("sparql:https://user:p@ss@host.org/sparql") == "sparql:https://***@host.org/sparql"
    assert redact("https://h.org/x?pwd=1&private_token=2&X-Amz-Signature=3&apiKey=4&max_tokens=5&author=me") == \
        "https://h.org/x?pwd=***&private_token=***&X-Amz-Signature=***&apiKey=***&max_tokens=5&author=me"


def test_redact_masks_known_token_shapes_and_values_of_secret_looking_names() -> None:
    openai, hf, aws = "sk-proj-Abc123Def456Ghi789", "hf_" + "a1B2" * 8, "AKIA" + "ABCDEFGH23456789"
    text = f"extra={{'note': '{openai}', 'hub_token': 'two words', 'max_tokens': 64}} {hf} {aws}"
    assert redact(text) == "extra={'note': '***', 'hub_token': '***', 'max_tokens': 64} *** ***"
    assert redact("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x") == "Authorization: Bearer ***"
    assert redact("api_key_env: OPENAI_API_KEY, password=hunter2, monkey=1") == \
        "api_key_env: OPENAI_API_KEY, password=***, monkey=1"
    assert redact_data({"llm": {"extra": {"note": openai, "hub_token": 7, "max_tokens": 64}, "api_key_env": "K"}}) \
        == {"llm": {"extra": {"note": "***", "hub_token": "***", "max_tokens": 64}, "api_key_env": "K"}}


def test_every_line_a_command_prints_is_masked_even_when_written_in_pieces() -> None:
    script = ("from kifqa.redact import mask_stdio; import logging, sys, click; mask_stdio(); "
              f"print('the key', 'https://u:{KB_PASSWORD}@h.org/', 'and', {OPENAI_KEY!r}[:10], end=''); "
              f"print({OPENAI_KEY!r}[10:]); click.echo('hf_token={LLM_PASSWORD}', err=True); "
              f"logging.getLogger('x').warning('Bearer %s', {LLM_PASSWORD!r}); sys.stderr.write('no newline')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout == "the key https://***@h.org/ and ***\n"
    assert done.stderr == "hf_token=***\nBearer ***\nno newline"


def test_kifqa_check_names_an_unreachable_kb_with_its_credentials_masked(built_kb) -> None:
    spec = f"sparql+wikidata:http://u:{KB_PASSWORD}@127.0.0.1:{free_port()}/sparql?private_token={KB_TOKEN}"
    done = subprocess.run([KIFQA, "check", "--kb", spec], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "KIFQA_LLM__BACKEND": "gold", "KIFQA_CACHE_DIR": str(TEST_CACHE)})
    assert done.returncode == 2
    assert "the KB endpoint http://***@127.0.0.1:" in done.stderr and "private_token=***" in done.stderr, done.stderr
    assert planted_in(done.stdout + done.stderr) == [] and KB_PASSWORD not in done.stderr


def test_a_secret_in_a_kifqa_variable_stays_out_of_rays_runtime_env(tmp_path) -> None:
    """The runtime env (shown by Ray's dashboard) carries the ``KIFQA_*`` variables without a secret; a task
    still gets the secret in the settings it is handed."""
    script = """
import json, ray
from kifqa.batch.pools import connect
from kifqa.config import Settings
settings = Settings()
connect(settings)
@ray.remote
def seen(settings):
    return ray.get_runtime_context().runtime_env.get("env_vars", {}), settings.kb.spec
print(json.dumps(ray.get(seen.remote(settings))))
"""
    spec = f"sparql+wikidata:http://u:{KB_PASSWORD}@127.0.0.1:9/sparql"
    with tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as ray_tmp:
        env = {**os.environ, "RAY_TMPDIR": ray_tmp, "KIFQA_KB__SPEC": spec, "KIFQA_LLM__EXTRA__HUB_TOKEN": HUB_TOKEN,
               "KIFQA_BATCH__SHARD_SIZE": "3"}
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                              cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr
    env_vars, spec_in_task = json.loads(done.stdout.strip().splitlines()[-1])
    assert env_vars.get("KIFQA_BATCH__SHARD_SIZE") == "3"
    assert "KIFQA_KB__SPEC" not in env_vars and "KIFQA_LLM__EXTRA__HUB_TOKEN" not in env_vars
    assert spec_in_task == spec


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


#: Secrets planted in every form a user gives them: a KB password holding an ``@``, a KB token in a query
#: parameter, an OpenAI-shaped key and a value under a secret-looking name in ``llm.extra``.
KB_PASSWORD_TAIL, KB_TOKEN = "PlantedKbPassword1", "PlantedKbToken22"
OPENAI_KEY, HUB_TOKEN = "sk-PlantedOpenAIKey0123456789", "PlantedHubToken333"
PLANTED = (KB_PASSWORD_TAIL, KB_TOKEN, "PlantedOpenAIKey", HUB_TOKEN)


def planted_in(text: str) -> list[str]:
    return [s for s in PLANTED if s in text]


def files_with_planted_secrets(*folders: Path) -> dict[str, list[str]]:
    """Every file under ``folders`` (a Parquet file's rows, a report's unpacked data, any other file's bytes)
    that holds a planted secret."""
    found = {}
    for path in (p for folder in folders for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        text = (json.dumps(pq.read_table(path).to_pylist(), default=str) if path.suffix == ".parquet"
                else path.read_bytes().decode("utf-8", "replace"))
        if path.suffix == ".html":
            blobs = re.findall(r'type="application/gzip-base64"[^>]*>([A-Za-z0-9+/=]+)</script>', text)
            assert blobs, "the report's data was read"
            text += "".join(gzip.decompress(base64.b64decode(blob)).decode() for blob in blobs)
        if leaked := planted_in(text):
            found[str(path)] = leaked
    return found


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_planted_secrets_reach_no_output_of_a_check_an_interrupted_run_its_resume_or_a_report(
        settings, built_kb, oxigraph_server, tmp_path) -> None:
    """The KB's password is used (the endpoint refuses requests without it) and given on the command line,
    then in ``KIFQA_KB__SPEC`` (which Ray's runtime env would carry); no file, log or line shows a secret."""
    questions = load_sqwd(settings.data_dir, "valid")[:16]
    corpus, out, report = tmp_path / "q.jsonl", tmp_path / "out", tmp_path / "report" / "report.html"
    corpus.write_text("".join(json.dumps({"id": q.id, "question": q.text}) + "\n" for q in questions))
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "data_dir": str(settings.data_dir), "cache_dir": str(settings.cache_dir), "examples": {"mode": "fixed"},
        "llm": {"backend": "gold", "cache": None, "extra": {"note": OPENAI_KEY, "hub_token": HUB_TOKEN}},
        "batch": {"shard_size": 2, "max_tasks": 1, "kb_cache": False}}))
    credentials = f"kbuser:pw@{KB_PASSWORD_TAIL}"
    with FaultProxy(oxigraph_server) as endpoint, tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as ray_tmp:
        endpoint.required = ("Basic " + base64.b64encode(credentials.encode()).decode(),)
        spec = f"sparql+wikidata:{endpoint.url.replace('http://', f'http://{credentials}@')}?private_token={KB_TOKEN}"
        env = {**os.environ, "RAY_TMPDIR": ray_tmp}
        run = [KIFQA, "run", str(corpus), "--out", str(out), "--config", str(config), "--no-progress"]
        job = subprocess.Popen([*run, "--kb", spec], cwd=REPO, env=env, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        deadline = time.monotonic() + 600
        while not (out / "traces").is_dir() or not RunFolder(out).finished():
            assert job.poll() is None and time.monotonic() < deadline, job.communicate()
            time.sleep(0.2)
        job.send_signal(signal.SIGTERM)
        stopped = job.communicate(timeout=180)
        resumed = subprocess.run(run, cwd=REPO, env={**env, "KIFQA_KB__SPEC": spec}, capture_output=True,
                                 text=True, timeout=900)
        written = subprocess.run([KIFQA, "report", str(out), "--out", str(report)], cwd=REPO, env=env,
                                 capture_output=True, text=True, timeout=300)
        dead = spec.replace(endpoint.origin.removeprefix("http://"), f"127.0.0.1:{free_port()}")
        checked = subprocess.run([KIFQA, "check", "--config", str(config), "--kb", dead], cwd=REPO, env=env,
                                 capture_output=True, text=True, timeout=300)
        leaked_files = files_with_planted_secrets(out, Path(ray_tmp), report.parent)
    printed = {name: leaked for name, text in [("stopped", "".join(stopped)), ("resumed", resumed.stdout + resumed.stderr),
                                                ("report", written.stdout + written.stderr),
                                                ("check", checked.stdout + checked.stderr)]
               if (leaked := planted_in(text))}
    assert {**printed, **leaked_files} == {}
    assert job.returncode == 128 + signal.SIGTERM, stopped
    assert "resume with:" in stopped[1] and "--kb 'sparql+wikidata:http://***@127.0.0.1" in stopped[1], stopped[1]
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert RunFolder(out).read_manifest()["status"] == "finished"
    assert endpoint.counts["ok"] > 0 and endpoint.counts["unauthorized"] == 0, "the KB was asked with the secrets"
    traces = pq.read_table(out / "traces").to_pylist()
    assert len(traces) == len(questions) and not [t["error"] for t in traces if t["error"]]
    assert written.returncode == 0, written.stderr
    assert checked.returncode == 2 and "the KB endpoint http://***@127.0.0.1:" in checked.stderr, checked.stderr
    assert RunFolder(out).read_manifest()["config"]["llm"]["extra"] == {"note": "***", "hub_token": "***"}


def free_port() -> int:
    """A local port where nothing listens (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
