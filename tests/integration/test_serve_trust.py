"""``kifqa serve``/``kifqa ask`` at their trust boundary, on real Unix sockets (no model: the server's
answers come from a plain function): ``ask`` sends nothing to another user's listener and no secret to
any; ``serve`` refuses a socket folder others could write to; every malformed or oversized request gets
an error reply and the connection goes on; questions, connections and replies are bounded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from kifqa.cli.service import ServeLimits, _claim, ask_served, settings_inputs, start_server

NOBODY = 65534

class Listener:
    """A forked child that listens on ``path`` as ``uid`` (this process's when ``None``), accepts one
    connection and reports how many bytes it was sent."""

    def __init__(self, path: Path, *, uid: int | None) -> None:
        ready, self._report = os.pipe()
        self._read, done = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            try:
                if uid is not None:
                    os.setgid(uid)
                    os.setuid(uid)
                listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listening.bind(str(path))
                os.chmod(path, 0o777)
                listening.listen()
                os.write(self._report, b"ready")
                conn, _ = listening.accept()
                conn.settimeout(3)
                got = 0
                try:
                    while chunk := conn.recv(65536):
                        got += len(chunk)
                except OSError:
                    pass
                os.write(done, str(got).encode())
            finally:
                os._exit(0)
        os.close(done)
        os.close(self._report)
        assert os.read(ready, 5) == b"ready", "the listener started"
        os.close(ready)

    def received(self) -> int:
        got = int(os.read(self._read, 64))
        os.waitpid(self.pid, 0)
        return got


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder anyone may write to, in the temporary folder (pytest's own is closed to other users)."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        folder.chmod(0o777)
        yield folder


@pytest.mark.skipif(os.getuid() != 0, reason="a listener of another uid needs root to start it")
def test_a_listener_of_another_user_gets_nothing(open_folder: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KIFQA_LLM__BASE_URL", "https://user:s3cret@llm.example/v1")
    inputs = settings_inputs(None, None, None, None)
    for user, sent in ((NOBODY, False), (None, True)):  # another user's listener, then one of this user's
        path = open_folder / f"{user}.sock"
        listener = Listener(path, uid=user)
        left = list(ask_served(path, inputs, iter(["who wrote dracula"]), explain=False, as_json=False, title=False,
                               limits=ServeLimits(reply_timeout_s=1.0)))
        received = listener.received()
        assert left == ["who wrote dracula"], "the question is answered in this process"
        assert (received > 0) == sent, received
    note = capsys.readouterr().err
    assert f"the listener is uid {NOBODY}, not you (uid 0); nothing sent" in note


@contextlib.contextmanager
def replying_once(path: Path, output: str) -> Iterator[list[bytes]]:
    """A listener on ``path`` that takes one connection, keeps the request line it is sent (in the list yielded)
    and replies ``output`` as a served answer; joined and closed on exit."""
    server, received = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), []
    server.bind(str(path))
    server.listen()

    def reply() -> None:
        conn, _ = server.accept()
        with conn, conn.makefile("rwb") as stream:
            received.append(stream.readline())
            stream.write(json.dumps({"output": output}).encode() + b"\n")
            stream.flush()

    thread = threading.Thread(target=reply)
    thread.start()
    try:
        yield received
    finally:
        thread.join()
        server.close()


def test_what_ask_sends_holds_no_secret(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KIFQA_LLM__BASE_URL", "https://user:s3cret@llm.example/v1")
    path = tmp_path / "s.sock"
    with replying_once(path, "Bram Stoker \x1b[2J\x1b]0;owned\x07 \u202e") as received:
        inputs = settings_inputs(None, None, None, None)
        left = list(ask_served(path, inputs, iter(["who wrote dracula"]), explain=False, as_json=False, title=False))
    assert left == []
    request = json.loads(received[0])
    assert b"s3cret" not in received[0] and os.getcwd().encode() not in received[0]
    assert request["question"] == "who wrote dracula"
    assert set(request["inputs"]) == {"config", "kb", "model", "examples", "env", "cwd", "package"}
    assert all(len(v) == 64 for v in request["inputs"].values()), "digests only"


def test_replies_are_printed_with_control_characters_escaped(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.sock"
    with replying_once(path, "Bram Stoker\x1b[2J\x1b]0;owned\x07\u202e\ttab\nline"):
        list(ask_served(path, {}, iter(["q"]), explain=False, as_json=False, title=False))
    out = capsys.readouterr().out
    assert out == "Bram Stoker\\u001b[2J\\u001b]0;owned\\u0007\\u202e\ttab\nline\n"


def test_a_socket_folder_others_can_write_or_own_is_refused(open_folder: Path, tmp_path: Path) -> None:
    with pytest.raises(click.ClickException, match=r"is open to others \(mode 0777\)"):
        _claim(open_folder / "s.sock")
    assert not (open_folder / "s.sock").exists()
    if os.getuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, NOBODY, NOBODY)
        with pytest.raises(click.ClickException, match=f"belongs to uid {NOBODY}, not to you"):
            _claim(theirs / "s.sock")
    fresh = tmp_path / "new" / "s.sock"
    _claim(fresh).close()
    assert oct(fresh.parent.stat().st_mode & 0o777) == "0o700"


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def ask(self, line: bytes) -> dict[str, str]:
        self.writer.write(line)
        await self.writer.drain()
        return json.loads(await self.reader.readline())


def serve(tmp_path: Path, limits: ServeLimits, checks) -> None:
    """Runs ``checks(connect)`` against a server answering ``answer: <question>`` (``slow`` sleeps, ``crash``
    raises)."""
    path = tmp_path / "s.sock"
    inputs = {"config": "x"}

    async def answer(question: str, options: dict[str, bool]) -> str:
        if question == "slow":
            await asyncio.sleep(30)
        if question == "crash":
            raise RuntimeError("the renderer broke")
        return f"answer: {question}"

    async def main() -> None:
        server = await start_server(_claim(path), inputs, answer, limits=limits)
        async with server:
            async def connect() -> Client:
                return Client(*await asyncio.open_unix_connection(str(path), limit=2**24))
            await checks(connect)

    asyncio.run(main())


def request(question: object, **extra: object) -> bytes:
    return json.dumps({"inputs": {"config": "x"}, "question": question, **extra}).encode() + b"\n"


def test_malformed_and_oversized_requests_get_error_replies_and_the_connection_goes_on(tmp_path: Path) -> None:
    async def checks(connect) -> None:
        client = await connect()
        huge = request("x" * (1 << 20))
        assert len(huge) > 1 << 20
        assert await client.ask(huge) == {"error": "malformed request: a line over 65536 bytes"}
        assert await client.ask(b'{"inputs": {"config": "x"}, "question": "\\ud800"}\n') == \
            {"error": "malformed request: the question has a lone surrogate (not a character)"}
        assert "error" in await client.ask(b"not json\n")
        assert "error" in await client.ask(b'{"inputs": {"config": "x"}, "question": ["a"]}\n')
        assert "error" in await client.ask(b"\xff\xfe\n")
        assert await client.ask(request("who wrote dracula", inputs={"config": "y"})) == \
            {"refused": "it runs other settings (config)"}
        assert await client.ask(request("crash")) == \
            {"error": "the server failed on this question (RuntimeError: the renderer broke)"}
        assert await client.ask(request("who wrote dracula")) == {"output": "answer: who wrote dracula"}

    serve(tmp_path, ServeLimits(), checks)


def test_questions_and_connections_are_bounded(tmp_path: Path) -> None:
    async def checks(connect) -> None:
        first = await connect()
        assert await first.ask(request("slow")) == {"error": "no answer within 0.2 s"}
        second = await connect()
        third = await connect()
        assert json.loads(await third.reader.readline()) == {"error": "busy: 2 connections are open; try again"}
        assert await third.reader.read() == b"", "closed"
        assert await second.ask(request("q")) == {"output": "answer: q"}

    serve(tmp_path, ServeLimits(max_connections=2, question_timeout_s=0.2), checks)


def test_a_line_past_the_discard_limit_ends_the_connection(tmp_path: Path) -> None:
    async def checks(connect) -> None:
        client = await connect()
        try:
            client.writer.write(b"x" * (1 << 20))
            await client.writer.drain()
            assert await asyncio.wait_for(client.reader.read(), 10) == b""
        except ConnectionResetError:
            pass  # closed while the client was still sending
        assert client.reader.at_eof() or client.writer.is_closing()

    serve(tmp_path, ServeLimits(max_discard_bytes=1 << 18), checks)


