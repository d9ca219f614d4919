"""``kifqa serve`` keeps one pipeline open and ``kifqa ask`` answers through it (the real 0.5B model): the
same answers as in-process, without importing KIF; other settings and bad requests are answered, never lost."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import yaml

from kifqa.cli.service import _claim
from kifqa.config import Settings
from tests.conftest import REPO

pytest.importorskip("xllamacpp", reason="the local backend needs xllamacpp: pip install 'kifqa[local]'")

KIFQA = str(Path(sys.executable).with_name("kifqa"))
QUESTION = "where was sasha vujačić born"


class Served:
    def __init__(self, config: Path, sock: Path, log: Path) -> None:
        self.config, self.sock, self.log = config, sock, log

    def ask(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KIFQA, "ask", "--config", str(self.config), "--socket", str(self.sock), *args],
                              capture_output=True, text=True, timeout=300, cwd=REPO)

    def answered(self) -> list[str]:
        """The questions the server has answered, from its log."""
        return [json.loads(line.split(": ", 1)[1]) for line in self.log.read_text().splitlines()
                if " answer(s) in " in line]


@pytest.fixture(scope="module")
def served(settings: Settings, built_kb, tmp_path_factory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("serve")
    config, sock, log = folder / "ask.yaml", folder / "s.sock", folder / "serve.log"
    config.write_text(yaml.safe_dump({"data_dir": str(settings.data_dir), "cache_dir": str(settings.cache_dir),
                                      "llm": {"model": "qwen2.5-coder-0.5b", "threads": 1},
                                      "examples": {"mode": "fixed"}}))
    with log.open("w") as out:
        server = subprocess.Popen([KIFQA, "serve", "--config", str(config), "--socket", str(sock)],
                                  stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    deadline = time.monotonic() + 240
    while "ready in" not in log.read_text():
        assert server.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    yield Served(config, sock, log)
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=60) == 0, log.read_text()
    assert not sock.exists()


def test_ask_through_the_server_gives_the_in_process_answer(served: Served) -> None:
    there = served.ask("--json", QUESTION)
    assert there.returncode == 0, there.stderr
    assert served.answered() == [QUESTION]
    here = served.ask("--json", "--here", QUESTION)
    assert here.returncode == 0, here.stderr
    assert served.answered() == [QUESTION]
    a, b = json.loads(there.stdout), json.loads(here.stdout)
    assert a["answers"] and a["answers"] == b["answers"]
    for step in ("draft", "entities", "relations", "filters"):
        assert a["trace"][step] == b["trace"][step] or step == "filters" and \
            [f["filter"] for f in a["trace"][step]] == [f["filter"] for f in b["trace"][step]]


def test_a_served_ask_imports_neither_kif_nor_the_model(served: Served) -> None:
    probe = ("import sys\nfrom kifqa.cli import cli\ntry:\n    cli(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "print('LOADED', [m for m in ('kif_lib', 'kifqa.pipeline', 'xllamacpp', 'numpy', 'pydantic')"
             " if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", probe, "ask", "--config", str(served.config), "--socket",
                           str(served.sock), "who wrote dracula"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("LOADED []"), done.stdout
    assert "who wrote dracula" in served.answered()


def test_other_settings_are_answered_in_process_with_a_note(served: Served) -> None:
    done = served.ask("--kb", "local", "what is the nationality of kim jong-un")
    assert done.returncode == 0, done.stderr
    assert f"kifqa serve at {served.sock}: it runs other settings (kb); answering in this process" in done.stderr
    assert done.stdout.strip() and "what is the nationality of kim jong-un" not in served.answered()


def test_several_questions_from_stdin_are_each_answered_once(served: Served) -> None:
    lines = "who wrote dracula\n\nwhat genre is the album thriller\n"
    done = subprocess.run([KIFQA, "ask", "--config", str(served.config), "--socket", str(served.sock), "-"],
                          input=lines, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    titles = [line for line in done.stdout.splitlines() if line.startswith("# ")]
    assert [t.rsplit("  (", 1)[0] for t in titles] == ["# who wrote dracula", "# what genre is the album thriller"]
    assert served.answered()[-2:] == ["who wrote dracula", "what genre is the album thriller"]


def test_a_bad_request_gets_an_error_and_the_server_goes_on(served: Served) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn, conn.makefile("rwb") as stream:
        conn.connect(str(served.sock))
        for line in (b"not json\n", b"[1, 2]\n", b'{"question": "who wrote dracula"}\n'):
            stream.write(line)
            stream.flush()
            reply = json.loads(stream.readline())
            assert set(reply) <= {"error", "refused"} and reply, reply
    done = served.ask(QUESTION)
    assert done.returncode == 0 and "Maribor" in done.stdout, done.stdout + done.stderr


def test_a_live_socket_is_not_taken_over_and_a_stale_one_is(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    live = _claim(path)
    live.listen()
    with pytest.raises(click.ClickException, match="already listens"):
        _claim(path)
    live.close()  # the file stays, nobody listens: a crashed server's
    assert path.exists()
    fresh = _claim(path)
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    fresh.close()


def test_nothing_listening_answers_in_process_without_a_note(served: Served, tmp_path: Path) -> None:
    done = subprocess.run([KIFQA, "ask", "--config", str(served.config), "--socket", str(tmp_path / "none.sock"),
                           QUESTION], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0 and "Maribor" in done.stdout, done.stderr
    assert "kifqa serve" not in done.stderr
