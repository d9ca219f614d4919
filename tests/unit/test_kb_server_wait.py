"""How long a server start may take: counted in the server's own CPU seconds, so a busy machine stretches the
wait but does not end it, while a stuck or spinning server still fails (real child processes)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kifqa.kb.server import cpu_seconds, wait_until

#: A child that works 50 ms in every 250 (as if it got a fifth of a CPU on a busy machine) and writes its
#: ready file once it has used ``sys.argv[2]`` CPU seconds.
_THROTTLED = """
import sys, time
ready, need = sys.argv[1], float(sys.argv[2])
while time.process_time() < need:
    until = time.process_time() + 0.05
    while time.process_time() < until:
        pass
    time.sleep(0.2)
open(ready, "w").close()
time.sleep(60)
"""


def _child(code: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.DEVNULL)


def _wait(process: subprocess.Popen[bytes], ready: Path | None, timeout_s: float) -> float:
    start = time.monotonic()
    try:
        wait_until(lambda: ready is not None and ready.exists(), process, timeout_s=timeout_s,
                   failed=RuntimeError, poll_s=0.02)
    finally:
        process.kill()
        process.wait()
    return time.monotonic() - start


@pytest.mark.skipif(cpu_seconds(1) is None, reason="needs /proc")
def test_a_server_slowed_by_a_busy_machine_is_waited_for_past_the_timeout_in_wall_time(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    waited = _wait(_child(_THROTTLED, str(ready), "0.5"), ready, timeout_s=1.0)
    assert ready.exists()
    assert waited > 1.0  # a wall-clock limit of 1 s would have given up


@pytest.mark.skipif(cpu_seconds(1) is None, reason="needs /proc")
def test_a_server_that_does_no_work_fails_after_the_timeout() -> None:
    with pytest.raises(RuntimeError, match="no work done"):
        _wait(_child("import time; time.sleep(60)"), None, timeout_s=0.5)


@pytest.mark.skipif(cpu_seconds(1) is None, reason="needs /proc")
def test_a_server_that_spins_without_answering_fails_once_it_used_the_timeout_in_cpu() -> None:
    with pytest.raises(RuntimeError, match="used 1 s of CPU"):
        _wait(_child("while True: pass"), None, timeout_s=0.5)


def test_a_server_that_exits_fails_at_once_with_its_status() -> None:
    with pytest.raises(RuntimeError, match="exited with status 3"):
        _wait(_child("raise SystemExit(3)"), None, timeout_s=30)
