"""A Ray address where nothing answers. With no address, ``kifqa run`` ignores the address file a local cluster
left when it died without ``ray stop`` and starts its own; an address given where nothing answers fails the
job in one line; ``kifqa check`` reports it as one problem beside the others.

Each command runs in a subprocess with Ray's own temp folder (``RAY_TMPDIR``), where the stale address file is
written: no other cluster on this machine is read or touched. The subprocess timeout is one the old code ran
into (it waited on the dead cluster for many minutes).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from ray._private import services

from kifqa.kb.build import BuiltKB
from tests.conftest import REPO, TEST_CACHE

MAIN = "from kifqa.cli import main; main()"


def free_port() -> int:
    """A local port where nothing listens (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def ray_tmp() -> Iterator[Path]:
    """Ray's temp folder for the commands (short: Ray's socket paths must stay under 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as folder:
        yield Path(folder)


def stale_address(ray_tmp: Path) -> str:
    """Writes Ray's address file as a cluster that died without ``ray stop`` leaves it; the address."""
    address = f"127.0.0.1:{free_port()}"
    (ray_tmp / "ray").mkdir()
    (ray_tmp / "ray" / "ray_current_cluster").write_text(address)
    return address


def kifqa(ray_tmp: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env |= {"RAY_TMPDIR": str(ray_tmp), "KIFQA_CACHE_DIR": str(TEST_CACHE), "KIFQA_LLM__BACKEND": "gold"}
    return subprocess.run([sys.executable, "-c", MAIN, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n"
                            for i, q in enumerate(["where was james brown born", "who wrote hamlet"])))
    return path


@pytest.mark.timeout(400)
def test_with_no_address_a_stale_address_file_is_ignored_and_a_local_cluster_answers(
        built_kb: BuiltKB, ray_tmp: Path, tmp_path: Path) -> None:
    dead = stale_address(ray_tmp)
    done = kifqa(ray_tmp, "run", str(corpus(tmp_path)), "--out", str(tmp_path / "out"), "--no-progress",
                 "--examples", "fixed", "--kb", "local")
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(pq.read_table(tmp_path / "out" / "traces").column("question_id").to_pylist()) == ["q0", "q1"]
    assert f"Ray's address file names a cluster at {dead} that does not answer" in done.stderr


@pytest.mark.timeout(200)
def test_an_address_where_nothing_answers_fails_the_job_in_one_line(ray_tmp: Path, tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    done = kifqa(ray_tmp, "run", str(corpus(tmp_path)), "--out", str(tmp_path / "out"), "--no-progress",
                 "--examples", "fixed", "--kb", "local", "--address", dead, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"Error: ConfigError: no Ray cluster answers at {dead} (the address {dead}: --address, batch.ray_address or "
        "RAY_ADDRESS): start it, give the address of a running one, or leave the address out to start a local "
        "cluster"]


def gpu_job(tmp_path: Path) -> Path:
    """A job on 1 GPU (so the check asks the cluster) whose output cannot be written (another problem)."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump({
        "kb": {"spec": "local"}, "examples": {"mode": "fixed"},
        "batch": {"out": str(blocker / "out"), "llm_actors": 1, "llm_actor_gpus": 1}}))
    return config


@pytest.mark.timeout(200)
def test_kifqa_check_reports_a_dead_cluster_as_one_problem_and_keeps_the_others(ray_tmp: Path,
                                                                               tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    done = kifqa(ray_tmp, "check", "--config", str(gpu_job(tmp_path)), "--address", dead, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert [line.partition(":")[0] for line in lines] == ["cluster", "output"], lines
    assert lines[0].startswith(f"cluster: no Ray cluster answers at {dead} ")


@pytest.mark.timeout(200)
def test_kifqa_check_with_address_auto_and_no_cluster_says_so_in_one_line(ray_tmp: Path, tmp_path: Path) -> None:
    if services.find_gcs_addresses():
        pytest.skip("a Ray cluster runs on this machine: `auto` would find it")
    done = kifqa(ray_tmp, "check", "--config", str(gpu_job(tmp_path)), "--address", "auto", timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert [line.partition(":")[0] for line in lines] == ["cluster", "output"], lines
    assert lines[0] == ("cluster: no Ray cluster is running on this machine (--address auto): start one (`ray start "
                        "--head`), give the address of a running one, or leave the address out to start a local "
                        "cluster")
