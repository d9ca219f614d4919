"""``kifqa serve``: a long-lived local process that keeps one pipeline open (the model loaded, its few-shot
blocks in its slots, the KB, the encoder and the label index open), and the client side ``kifqa ask``
uses to answer through it instead of loading all of that again.

The protocol is one JSON object a line over a Unix socket that only this user can reach. A request is
``{"inputs": ..., "question": "...", "explain": bool, "json": bool, "title": bool}``; the reply is
``{"output": "..."}`` (what ``kifqa ask`` prints), ``{"refused": "why"}`` where the request's settings
inputs are not the server's, or ``{"error": "why"}`` for a malformed request (not JSON, no text
question, a lone surrogate, a line over :attr:`ServeLimits.max_request_bytes`), a question past its time
limit or a server at its connection limit. The settings inputs are SHA-256 digests of what
:func:`~kifqa.cli.options.load_settings` reads: the settings file's text, the command-line choices, the
``KIFQA_*`` environment, the working folder and the installed package. Equal inputs give equal
settings, so a served answer is the answer ``kifqa ask`` would have given in-process; being digests,
they carry no secret.

Trust: ``kifqa serve`` binds its socket 0600 in a folder only its user may write to; ``kifqa ask``
sends nothing to a listener whose peer credentials (``SO_PEERCRED``) name another user, bounds its
waits, and prints replies with control characters escaped.

This module imports only the standard library and click at the top: ``kifqa ask`` reaches a running
server without importing KIF, the pipeline or the model (about 2.5 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import os
import re
import signal
import socket
import stat
import struct
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kifqa.cli.options import fail, load_settings, settings_options
from kifqa.errors import KifqaError
from kifqa.redact import redact

if TYPE_CHECKING:
    from kifqa.config import Settings

#: The question answered once at start, to load the model, the encoder, a block and the KB's index.
WARM_UP = "where was james brown born"


@dataclass(frozen=True)
class ServeLimits:
    """What ``kifqa serve`` and ``kifqa ask`` allow each other."""

    #: Bytes of one request line; a longer one is read to its end, dropped and answered with an error.
    max_request_bytes: int = 64 * 1024
    #: Bytes of an over-long request line read and dropped before the server ends the connection instead.
    max_discard_bytes: int = 64 * 1024 * 1024
    #: Connections served at once; one more gets an error reply and is closed.
    max_connections: int = 16
    #: Seconds one question may take on the server; then its reply is an error.
    question_timeout_s: float = 300.0
    #: Seconds a connection may wait between requests before the server closes it.
    idle_timeout_s: float = 600.0
    #: Seconds the client waits to connect.
    connect_timeout_s: float = 2.0
    #: Seconds the client waits for a reply (the server's limit on a question, and some).
    reply_timeout_s: float = 330.0
    #: Bytes of one reply the client reads; a longer one counts as a failed connection.
    max_reply_bytes: int = 64 * 1024 * 1024


def default_socket() -> Path:
    """Where ``kifqa serve`` listens by default: a folder of this user's in ``$XDG_RUNTIME_DIR`` (or
    the temporary folder)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(runtime) / f"kifqa-{os.getuid()}" / "serve.sock"


def socket_option(func: Any) -> Any:
    """``--socket``: the Unix socket ``kifqa serve`` listens on and ``kifqa ask`` tries first."""
    return click.option("--socket", "socket_path", type=click.Path(dir_okay=False, path_type=Path),
                        default=default_socket, show_default="$XDG_RUNTIME_DIR/kifqa-UID/serve.sock",
                        help="The Unix socket of kifqa serve.")(func)


def settings_inputs(config: Path | None, kb: str | None, model: str | None,
                    examples: str | None) -> dict[str, str]:
    """A SHA-256 digest of each thing the settings are read from (see the module docstring): the server
    compares them with its own, and no secret of the settings (an API key in the environment, a
    password in a URL) leaves this process."""
    try:
        text = config.read_text() if config is not None else None
    except OSError:
        text = str(config)  # never equal to a served file's text: the in-process path reports the error
    inputs = {"config": text, "kb": kb, "model": model, "examples": examples,
              "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("KIFQA_")},
              "cwd": os.getcwd(), "package": str(Path(__file__).resolve().parent.parent)}
    return {key: hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
            for key, value in inputs.items()}


def printable(text: str) -> str:
    """``text`` with its control characters (but newlines and tabs) and bidirectional overrides written as
    ``\\uXXXX``: a reply can carry a peer's text, and a terminal must not run it as escape sequences."""
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


# -- client ---------------------------------------------------------------------------------------------

def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (``SO_PEERCRED``); ``None`` where the
    platform does not tell."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return int(uid)


def ask_served(path: Path, inputs: dict[str, str], questions: Iterator[str], *, explain: bool,
               as_json: bool, title: bool, limits: ServeLimits = ServeLimits()) -> Iterator[str]:
    """Prints each of ``questions``' answers as the server at ``path`` renders them; returns the questions
    it did not answer, all of them where no server listens there, from the first it refused or lost the
    connection on (a note on stderr says why). Nothing is sent to a listener run by another user."""
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(limits.connect_timeout_s)
        conn.connect(str(path))
    except OSError:
        return questions
    with conn:
        if (uid := peer_uid(conn)) != os.getuid():
            who = "an unknown user" if uid is None else f"uid {uid}"
            click.echo(f"kifqa serve at {path}: the listener is {who}, not you (uid {os.getuid()}); nothing sent, "
                       "answering in this process", err=True)
            return questions
        conn.settimeout(limits.reply_timeout_s)
        with conn.makefile("rwb") as stream:
            for question in questions:
                request = {"inputs": inputs, "question": question, "explain": explain, "json": as_json,
                           "title": title}
                try:
                    stream.write(_encode(request))
                    stream.flush()
                    reply = json.loads(stream.readline(limits.max_reply_bytes) or b"{}")
                    if not isinstance(reply, dict) or not isinstance(reply.get("output", ""), str):
                        raise ValueError("the reply is not a JSON object with an output text")
                except (OSError, ValueError) as err:
                    reply = {"refused": f"the connection failed ({err or type(err).__name__})"}
                if "output" not in reply:
                    why = reply.get("refused") or reply.get("error") or "the connection closed"
                    click.echo(printable(f"kifqa serve at {path}: {why}; answering in this process"), err=True)
                    return itertools.chain([question], questions)
                click.echo(printable(reply["output"]))
    return iter(())


# -- server ---------------------------------------------------------------------------------------------

@click.command()
@settings_options
@socket_option
def serve(config: Path | None, kb: str | None, model: str | None, examples: str | None,
          socket_path: Path) -> None:
    """Keep one pipeline open and answer ``kifqa ask`` through it, until Ctrl-C or SIGTERM.

    ``kifqa ask`` given the same settings (file, options, ``KIFQA_*`` environment, working folder) is
    answered here; any other is answered in its own process. The model decodes on the cores idle when
    the server starts unless ``llm.threads`` is set (set it to 1 where other work will share the machine).
    The socket's folder must be yours and writable by you alone (the default one is created so).
    """
    settings = load_settings(config, kb, model, examples, idle_threads=True)
    inputs = settings_inputs(config, kb, model, examples)
    try:
        asyncio.run(_serve(settings, inputs, socket_path))
    except KifqaError as err:
        raise fail(err) from err


async def _serve(settings: Settings, inputs: dict[str, str], path: Path) -> None:
    from kifqa.api import open_pipeline
    from kifqa.cli.render import render

    listening = _claim(path)  # bound, not yet listening: a client meanwhile answers in its own process
    start = time.perf_counter()
    try:
        async with open_pipeline(settings=settings) as pipeline:
            await pipeline.answer(WARM_UP)

            async def answer(question: str, options: dict[str, bool]) -> str:
                began = time.perf_counter()
                result = await pipeline.answer(question)
                seconds = time.perf_counter() - began
                click.echo(f"{len(result.answers)} answer(s) in {seconds:.1f} s: "
                           f"{json.dumps(question, ensure_ascii=False)}", err=True)
                return render(result, explain=options["explain"], as_json=options["json"], title=options["title"],
                              seconds=seconds)

            server = await start_server(listening, inputs, answer)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            click.echo(f"kifqa serve: {settings.llm.model} on {redact(settings.kb.spec)}, {settings.llm.threads} "
                       f"thread(s), ready in {time.perf_counter() - start:.1f} s on {path} (pid {os.getpid()}); "
                       f"Ctrl-C stops it", err=True)
            await stop.wait()
            server.close()
    finally:
        listening.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _claim(path: Path) -> socket.socket:
    """A socket bound to ``path``, reachable by this user only, in a folder of this user's that no one
    else may write to (created 0700 if missing; another's, or one open to others, is an error: whoever
    can write there could put their own listener in the server's place). A stale socket file is
    replaced, a live server's is an error."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = path.parent.stat()
    if folder.st_uid != os.getuid():
        raise click.ClickException(f"the socket's folder {path.parent} belongs to uid {folder.st_uid}, not to you "
                                   f"(uid {os.getuid()}): another user could listen in kifqa serve's place; "
                                   "pass --socket in a folder of yours")
    if folder.st_mode & 0o022:
        raise click.ClickException(f"the socket's folder {path.parent} is open to others (mode "
                                   f"{stat.S_IMODE(folder.st_mode):04o}): they could replace the socket; "
                                   f"chmod go-w {path.parent}, or pass --socket in a folder of yours")
    if path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with probe:
            try:
                probe.connect(str(path))
            except OSError:
                path.unlink()
            else:
                raise click.ClickException(f"a kifqa serve already listens on {path}; stop it, or pass --socket")
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listening.bind(str(path))
    finally:
        os.umask(old)
    return listening


#: Renders the answer to a question: ``(question, {"explain": ..., "json": ..., "title": ...})``.
Answerer = Callable[[str, dict[str, bool]], Awaitable[str]]


async def start_server(listening: socket.socket, inputs: dict[str, str], answer: Answerer, *,
                       limits: ServeLimits = ServeLimits()) -> asyncio.Server:
    """Serves the protocol (see the module doc) on the bound socket ``listening``: requests whose
    ``inputs`` equal the server's are answered by ``answer``, within ``limits``."""
    connections = asyncio.Semaphore(limits.max_connections)

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if connections.locked():
            await _reply(writer, {"error": f"busy: {limits.max_connections} connections are open; try again"})
            writer.close()
            return
        async with connections:
            await _session(answer, inputs, limits, reader, writer)

    return await asyncio.start_unix_server(session, sock=listening, limit=limits.max_request_bytes)


async def _session(answer: Answerer, inputs: dict[str, str], limits: ServeLimits, reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter) -> None:
    """Answers one client's requests, one a line, until it closes the connection or stays idle past
    ``limits.idle_timeout_s``; every malformed request gets an error reply."""
    try:
        while True:
            try:
                line = await asyncio.wait_for(_request_line(reader, limits), limits.idle_timeout_s)
            except TimeoutError:
                break
            if line is None:
                await _reply(writer, {"error": f"malformed request: a line over {limits.max_request_bytes} bytes"})
                continue
            if not line:
                break
            await _reply(writer, await _handle(answer, inputs, limits, line))
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def _request_line(reader: asyncio.StreamReader, limits: ServeLimits) -> bytes | None:
    """The next request line (``b""`` at the end of the stream), or ``None`` for one over the size limit,
    which is read to its end and dropped (past ``max_discard_bytes`` the connection ends)."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as err:
        return err.partial
    except asyncio.LimitOverrunError as err:
        discarded = 0
        while True:
            discarded += len(await reader.readexactly(err.consumed))
            if discarded > limits.max_discard_bytes:
                raise ConnectionError("an over-long request line: connection closed") from None
            try:
                await reader.readuntil(b"\n")
                return None
            except asyncio.LimitOverrunError as more:
                err = more


async def _handle(answer: Answerer, inputs: dict[str, str], limits: ServeLimits, line: bytes) -> dict[str, str]:
    """The reply to one request line."""
    try:
        request = json.loads(line)
        question = request["question"]
        if not isinstance(question, str):
            raise TypeError(f"the question is a {type(question).__name__}, not a text")
        question.encode("utf-8")
        options = {k: bool(request.get(k)) for k in ("explain", "json", "title")}
    except UnicodeEncodeError:
        return {"error": "malformed request: the question has a lone surrogate (not a character)"}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        return {"error": f"malformed request ({type(err).__name__}: {err})"}
    if request.get("inputs") != inputs:
        return {"refused": "it runs other settings (" + ", ".join(_differing(request.get("inputs"), inputs)) + ")"}
    try:
        return {"output": await asyncio.wait_for(answer(question, options), limits.question_timeout_s)}
    except TimeoutError:
        return {"error": f"no answer within {limits.question_timeout_s:g} s"}
    except Exception as err:  # the server goes on for its other clients and questions
        return {"error": f"the server failed on this question ({type(err).__name__}: {err})"}


async def _reply(writer: asyncio.StreamWriter, reply: dict[str, str]) -> None:
    writer.write(_encode(reply))
    await writer.drain()


def _encode(message: dict[str, Any]) -> bytes:
    """One protocol line: JSON, UTF-8 (a lone surrogate, which UTF-8 cannot hold, written as ``?``)."""
    return json.dumps(message, ensure_ascii=False).encode("utf-8", "replace") + b"\n"


def _differing(given: Any, served: dict[str, str]) -> list[str]:
    """The settings inputs in which a request differs from the server's."""
    if not isinstance(given, dict):
        return ["none given"]
    return [key for key in served if given.get(key) != served[key]] or ["unknown"]
