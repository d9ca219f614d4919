"""``ray job submit`` against a cluster started with ``ray start --head``, as docs/batch.md describes.

The cluster is private to the test: its own temp folder and ports (another process's ``ray.init()``
must never find and join it), and it is stopped in the fixture by ending exactly the processes it
started (``ray stop`` would stop every Ray cluster of the user on the machine). The job runs
``jobs/answer.py`` with the gold model over the local base, so it needs no model weights.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from kifqa.config import Settings
from kifqa.data.pool import gold_examples
from kifqa.kb.build import BuiltKB
from kifqa.llm.gold import GoldLLM

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")
N = 30


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def processes_under(folder: str) -> list[int]:
    """Ids of this user's processes whose command line names ``folder`` (the cluster's temp folder)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if folder in cmdline.read_bytes().decode(errors="replace") and cmdline.parent.stat().st_uid == os.getuid():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid()]


def stop(pids: list[int]) -> None:
    """SIGTERM, then SIGKILL after 10 s, to exactly these processes."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.2)


@pytest.fixture
def head(settings: Settings) -> Iterator[tuple[str, dict[str, str]]]:
    """The dashboard address of a private ``ray start --head`` cluster and the environment to reach it."""
    temp = tempfile.mkdtemp(prefix="kq-ray-", dir="/tmp")  # short: Ray's socket paths are length-limited
    gcs, dashboard, client, agent, agent_grpc, metrics, runtime_env, node, objects, low = free_ports(10)
    # Ray 2.60 clusters require a token (token authentication): this one has its own.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {
        "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "PYTHONPATH": str(REPO), "KIFQA_DATA_DIR": str(settings.data_dir), "KIFQA_CACHE_DIR": str(settings.cache_dir)}
    start = [str(RAY), "start", "--head", f"--temp-dir={temp}", f"--port={gcs}", "--num-cpus=2",
             "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
             f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent}",
             f"--dashboard-agent-grpc-port={agent_grpc}", f"--metrics-export-port={metrics}",
             f"--runtime-env-agent-port={runtime_env}", f"--node-manager-port={node}",
             f"--object-manager-port={objects}", f"--worker-port-list={','.join(map(str, free_ports(12)))}",
             "--disable-usage-stats"]
    try:
        subprocess.run(start, env=env, check=True, capture_output=True, timeout=180)
        yield f"http://127.0.0.1:{dashboard}", env
    finally:
        stop(processes_under(temp))
        shutil.rmtree(temp, ignore_errors=True)
    assert not processes_under(temp), "the cluster's processes are gone"


def test_ray_job_submit_runs_the_batch_job_on_the_cluster(head: tuple[str, dict[str, str]], settings: Settings,
                                                          built_kb: BuiltKB, tmp_path: Path) -> None:
    address, env = head
    gold = GoldLLM(gold_examples(settings.data_dir))
    texts = list(dict.fromkeys(gold.drafts))[:N]
    corpus, out = tmp_path / "corpus.jsonl", tmp_path / "out"
    corpus.write_text("".join(json.dumps({"id": f"q{i}", "question": t}) + "\n" for i, t in enumerate(texts)))
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump({"llm": {"backend": "gold"}, "batch": {
        "corpus": str(corpus), "out": str(out), "kb_cache": False, "llm_actor_cpus": 0, "shard_size": 10}}))
    submit = [str(RAY), "job", "submit", "--address", address, "--working-dir", str(REPO),
              "--runtime-env-json", json.dumps({"env_vars": {k: env[k] for k in ("KIFQA_DATA_DIR", "KIFQA_CACHE_DIR")}}),
              "--", sys.executable, "jobs/answer.py", "--config", str(config), "--no-progress"]
    done = subprocess.run(submit, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "succeeded" in (done.stdout + done.stderr).lower()
    traces = pq.read_table(out / "traces", columns=["question_id", "error", "model"]).to_pylist()
    assert sorted(t["question_id"] for t in traces) == sorted(f"q{i}" for i in range(N))
    assert not [t for t in traces if t["error"]] and {t["model"] for t in traces} == {"gold:sqwd"}
    assert json.loads((out / "manifest.json").read_text())["status"] == "finished"
