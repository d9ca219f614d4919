"""``kifqa ask`` decodes on the idle cores unless ``llm.threads`` is set; batch commands keep the setting."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import kifqa.api
import kifqa.cli.options
from kifqa.cli import cli
from kifqa.cli.options import idle_cores, load_settings
from kifqa.errors import KifqaError


@pytest.fixture
def four_cores(monkeypatch):
    """Four cores, ``load(busy)`` of them busy in /proc/stat's next window."""
    monkeypatch.delenv("KIFQA_LLM__THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 4)

    def load(busy: float) -> None:
        ticks = iter([(1000, 600), (1000 + 400, 600 + round(100 * (4 - busy)))])
        monkeypatch.setattr(kifqa.cli.options, "_cpu_ticks", lambda: next(ticks))
    return load


@pytest.mark.parametrize(("busy", "threads"), [(0.0, 4), (1.2, 3), (3.6, 1), (4.0, 1)])
def test_idle_cores_leave_the_busy_ones(four_cores, busy, threads):
    four_cores(busy)
    assert idle_cores(window_s=0) == threads


def test_the_real_machine_has_an_idle_core_count():
    assert 1 <= idle_cores(window_s=0.05) <= (os.cpu_count() or 1)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a second core")
def test_a_busy_core_is_seen():
    """A process spinning on one core leaves at most the others idle (on 2 cores: 1)."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert idle_cores(window_s=0.5) <= (os.cpu_count() or 1) - 1
    finally:
        spinner.kill()


def test_unset_threads_become_the_idle_cores(four_cores):
    four_cores(1.0)
    assert load_settings(None, idle_threads=True).llm.threads == 3
    assert load_settings(None).llm.threads == 1


def test_threads_from_the_environment_or_the_file_win(four_cores, monkeypatch, tmp_path):
    four_cores(0.0)
    config = tmp_path / "job.yaml"
    config.write_text("llm: {threads: 2}\n")
    assert load_settings(config, idle_threads=True, model="qwen2.5-coder-0.5b").llm.threads == 2
    monkeypatch.setenv("KIFQA_LLM__THREADS", "1")
    assert load_settings(None, idle_threads=True).llm.threads == 1


def test_ask_opens_its_model_on_the_idle_cores(four_cores, monkeypatch):
    four_cores(2.0)
    seen = {}

    @contextlib.asynccontextmanager
    async def no_pipeline(*, settings):
        seen["settings"] = settings
        raise KifqaError("stop here")
        yield

    monkeypatch.setattr(kifqa.api, "open_pipeline", no_pipeline)
    result = CliRunner().invoke(cli, ["ask", "--here", "--model", "qwen2.5-coder-0.5b", "who wrote dracula"])
    assert result.exit_code == 1, result.output
    assert seen["settings"].llm.threads == 2
    assert seen["settings"].llm.model == "qwen2.5-coder-0.5b"
