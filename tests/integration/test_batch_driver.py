"""Ctrl-C or SIGTERM stops ``kifqa run`` with one line, what is done and the command that resumes it."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kifqa.batch.driver import _stoppable
from kifqa.config import Settings
from kifqa.eval.datasets import load_sqwd
from kifqa.kb.build import BuiltKB
from kifqa.runs import RunFolder
from tests.conftest import REPO, TEST_CACHE

MAIN = "from kifqa.cli import main; main()"


def test_sigterm_becomes_a_keyboard_interrupt_while_the_job_runs() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), _stoppable() as received:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises at once
    assert received == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_sigterm_after_the_first_shard_stops_in_one_line_and_its_command_resumes(
        settings: Settings, built_kb: BuiltKB, tmp_path: Path) -> None:
    corpus, out = tmp_path / "q.jsonl", tmp_path / "out"
    questions = load_sqwd(settings.data_dir, "valid")[:40]
    corpus.write_text("".join(json.dumps({"id": q.id, "question": q.text}) + "\n" for q in questions))
    args = ["run", str(corpus), "--out", str(out), "--shard-size", "2", "--no-progress", "--examples", "fixed"]
    env = os.environ | {"KIFQA_CACHE_DIR": str(TEST_CACHE), "KIFQA_LLM__BACKEND": "gold"}  # the zero-cost model
    job = subprocess.Popen([sys.executable, "-c", MAIN, *args], cwd=REPO, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while not (out / "traces").is_dir() or not RunFolder(out).finished():
        assert job.poll() is None and time.monotonic() < deadline, "the job ended before its first shard"
        time.sleep(0.2)
    job.send_signal(signal.SIGTERM)
    _, stderr = job.communicate(timeout=180)

    assert job.returncode == 128 + signal.SIGTERM
    assert "SIGTERM received" not in stderr and "Traceback" not in stderr and "StackTrace" not in stderr
    last = stderr.strip().splitlines()[-1]
    said = re.fullmatch(r"Stopped by SIGTERM: (\d+) of 20 shards written to (\S+) \((\d+) questions\); "
                        r"resume with: (.+)", last)
    assert said, stderr
    assert 1 <= int(said[1]) < 20 and said[2] == str(out) and int(said[3]) == 2 * int(said[1])
    assert said[4] == shlex.join(["kifqa", *args])
    assert RunFolder(out).read_manifest()["status"] == "stopped"

    command = shlex.split(said[4])
    resumed = subprocess.run([sys.executable, "-c", MAIN, *command[1:]], cwd=REPO, env=env, text=True,
                             capture_output=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    assert len(RunFolder(out).finished()) == 20 and RunFolder(out).read_manifest()["status"] == "finished"
