"""A cluster whose nodes cannot reach the object store the driver reaches: ``kifqa run`` stops in the
preflight with one line, before any shard starts.

The Ray cluster starts while ``AWS_ENDPOINT_URL`` names a closed local port (its workers keep that
environment, as a cluster's nodes keep theirs); then moto's S3 server (tests/s3_server.py) starts and sets
the right one for the driver only. (The nodes get a wrong endpoint rather than none: with none, pyarrow
would go to AWS, and the tests reach only 127.0.0.1.)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from kifqa.kb.build import BuiltKB
from tests.conftest import REPO, TEST_CACHE
from tests.s3_server import S3Server, aws_environment, s3_server


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Ray cluster whose workers' ``AWS_ENDPOINT_URL`` names a closed port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    with aws_environment(closed, key="nobody", secret="nothing"):
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def s3(cluster: str) -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


@pytest.mark.timeout(300)
def test_nodes_that_cannot_reach_the_store_stop_the_job_in_the_preflight(
        cluster: str, s3: S3Server, built_kb: BuiltKB, tmp_path: Path) -> None:
    corpus = tmp_path / "q.jsonl"
    corpus.write_text("".join(f'{{"id": "q{i}", "question": "where was person {i} born"}}\n' for i in range(30)))
    out = s3.uri("runs/nodes")
    env = os.environ | {"KIFQA_CACHE_DIR": str(TEST_CACHE), "KIFQA_LLM__BACKEND": "gold"}
    done = subprocess.run([sys.executable, "-c", "from kifqa.cli import main; main()", "run", str(corpus),
                           "--out", out, "--address", cluster, "--shard-size", "1", "--examples", "fixed",
                           "--kb", "local", "--no-progress"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    lines = [line for line in done.stderr.strip().splitlines() if "\tINFO " not in line]  # Ray's own, as it joins
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-3000:]
    assert len(lines) == 1, lines
    assert lines[0].startswith("Error: ConfigError: on the Ray node(s) ") and "in the workers' environment: the " \
        f"output {out} is not writable" in lines[0], lines[0]
    assert s3.objects("runs/nodes/") == {}, "no shard started, nothing written"
