"""Actors killed mid-run (an LLM actor, a KB actor) lose and duplicate no row: Ray restarts them and
reruns the calls they held. (A killed shard worker and a killed driver: ``test_batch_job.py``.)"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray

from kifqa.batch import run_job
from kifqa.config import Settings
from kifqa.runs import RunFolder
from tests.fakes import FakeKB, FakeLLM
from tests.integration.test_batch_job import _corpus, _settings, fakes

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class PidLLM(FakeLLM):
    """A model double that notes the process it lives in."""

    def __init__(self, settings: Settings, *, pids: str, delay: float) -> None:
        super().__init__(settings, delay=delay)
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\n")


class PidKB(FakeKB):
    """A knowledge-base double that notes the process it lives in."""

    def __init__(self, spec: str, settings: Settings, *, pids: str) -> None:
        super().__init__(spec, settings)
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\n")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _kill_when_a_shard_is_done(out: Path, pids: Path, done_at_kill: list[int]) -> threading.Thread:
    """Kills (SIGKILL) the process named first in ``pids`` once the job has finished a shard; notes
    how many shards were finished then."""

    def kill() -> None:
        deadline = time.time() + 60
        while time.time() < deadline and not (RunFolder(out).finished() and pids.exists()):
            time.sleep(0.05)
        os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)
        done_at_kill.append(len(RunFolder(out).finished()))

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("victim", ["llm", "kb"])
def test_a_killed_actor_is_restarted_and_no_row_is_lost_or_duplicated(victim, cluster, tmp_path) -> None:
    flags, out, pids = tmp_path / "flags", tmp_path / "out", tmp_path / "pids"
    flags.mkdir()
    doubles = fakes(flags)
    if victim == "llm":
        doubles["open_llm"] = partial(PidLLM, pids=str(pids), delay=0.05)
    else:
        doubles["open_kb"] = partial(PidKB, pids=str(pids))
        doubles["open_llm"] = partial(FakeLLM, delay=0.05)
    done_at_kill: list[int] = []
    killer = _kill_when_a_shard_is_done(out, pids, done_at_kill)
    summary = run_job(_settings(tmp_path, task_concurrency=4, max_tasks=2), _corpus(tmp_path, 80), out,
                      progress=False, **doubles)
    killer.join()

    assert done_at_kill[0] < 8, "killed mid-run"
    assert len(pids.read_text().split()) == 2, "the actor was killed and restarted"
    traces = pq.read_table(out / "traces", columns=["question_id", "error"]).to_pylist()
    answers = pq.read_table(out / "answers", columns=["question_id"])["question_id"].to_pylist()
    assert sorted(t["question_id"] for t in traces) == sorted(f"q{i}" for i in range(80))
    assert [t for t in traces if t["error"]] == [], "the calls the dead actor held were rerun"
    assert sorted(answers) == sorted(f"q{i}" for i in range(80)), "one answer each, none twice"
    assert summary.ok and summary.answered == 80
