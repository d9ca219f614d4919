"""``kifqa serve``: a long-lived local process that keeps one pipeline open (the model loaded, its few-shot
blocks in its slots, the KB, the encoder and the label index open), and the client side ``kifqa ask``
uses to answer through it instead of loading all of that again.

The protocol is one JSON object a line over a Unix socket that only this user can reach. A request is
``{"inputs": ..., "question": "...", "explain": bool, "json": bool, "title": bool}``; the reply is
``{"output": "..."}`` (what ``kifqa ask`` prints), ``{"refused": "why"}`` where the request's settings
inputs are not the server's, or ``{"error": "why"}`` for a malformed request. The settings inputs are
what :func:`~kifqa.cli.options.load_settings` reads: the settings file's text, the command-line
choices, the ``KIFQA_*`` environment, the working folder and the installed package. Equal inputs give
equal settings, so a served answer is the answer ``kifqa ask`` would have given in-process.

This module imports only the standard library and click at the top: ``kifqa ask`` reaches a running
server without importing KIF, the pipeline or the model (about 2.5 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kifqa.cli.options import fail, load_settings, settings_options
from kifqa.errors import KifqaError

if TYPE_CHECKING:
    from kifqa.config import Settings
    from kifqa.pipeline import Pipeline

#: The question answered once at start, to load the model, the encoder, a block and the KB's index.
WARM_UP = "where was james brown born"


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
                    examples: str | None) -> dict[str, Any]:
    """Everything the settings are read from (see the module docstring), as JSON-ready values."""
    try:
        text = config.read_text() if config is not None else None
    except OSError:
        text = str(config)  # never equal to a served file's text: the in-process path reports the error
    return {"config": text, "kb": kb, "model": model, "examples": examples,
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("KIFQA_")},
            "cwd": os.getcwd(), "package": str(Path(__file__).resolve().parent.parent)}


# -- client ---------------------------------------------------------------------------------------------

def ask_served(path: Path, inputs: dict[str, Any], questions: Iterator[str], *, explain: bool,
               as_json: bool, title: bool) -> Iterator[str]:
    """Prints each of ``questions``' answers as the server at ``path`` renders them; returns the questions
    it did not answer, all of them where no server listens there, from the first it refused or lost the
    connection on (a note on stderr says why)."""
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(2.0)
        conn.connect(str(path))
        conn.settimeout(None)  # the pipeline's own timeouts bound each answer
    except OSError:
        return questions
    with conn, conn.makefile("rwb") as stream:
        for question in questions:
            request = {"inputs": inputs, "question": question, "explain": explain, "json": as_json, "title": title}
            try:
                stream.write(json.dumps(request, ensure_ascii=False).encode() + b"\n")
                stream.flush()
                reply = json.loads(stream.readline() or b"{}")
            except (OSError, ValueError) as err:
                reply = {"refused": f"the connection failed ({err or type(err).__name__})"}
            if "output" not in reply:
                why = reply.get("refused") or reply.get("error") or "the connection closed"
                click.echo(f"kifqa serve at {path}: {why}; answering in this process", err=True)
                return itertools.chain([question], questions)
            click.echo(reply["output"])
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
    """
    settings = load_settings(config, kb, model, examples, idle_threads=True)
    inputs = settings_inputs(config, kb, model, examples)
    try:
        asyncio.run(_serve(settings, inputs, socket_path))
    except KifqaError as err:
        raise fail(err) from err


async def _serve(settings: Settings, inputs: dict[str, Any], path: Path) -> None:
    from kifqa.api import open_pipeline

    listening = _claim(path)  # bound, not yet listening: a client meanwhile answers in its own process
    start = time.perf_counter()
    try:
        async with open_pipeline(settings=settings) as pipeline:
            await pipeline.answer(WARM_UP)
            server = await asyncio.start_unix_server(
                lambda reader, writer: _session(pipeline, inputs, reader, writer), sock=listening)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            click.echo(f"kifqa serve: {settings.llm.model} on {settings.kb.spec}, {settings.llm.threads} "
                       f"thread(s), ready in {time.perf_counter() - start:.1f} s on {path} (pid {os.getpid()}); "
                       f"Ctrl-C stops it", err=True)
            await stop.wait()
            server.close()
    finally:
        listening.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _claim(path: Path) -> socket.socket:
    """A socket bound to ``path``, reachable by this user only; a stale socket file is replaced, a live
    server's is an error."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
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


async def _session(pipeline: Pipeline, inputs: dict[str, Any], reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter) -> None:
    """Answers one client's requests, one a line, until it closes the connection."""
    from kifqa.cli.render import render

    try:
        while line := await reader.readline():
            try:
                request = json.loads(line)
                question = request["question"]
                options = {k: bool(request.get(k)) for k in ("explain", "json", "title")}
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                reply: dict[str, str] = {"error": f"malformed request ({type(err).__name__}: {err})"}
            else:
                if request.get("inputs") != inputs:
                    reply = {"refused": "it runs other settings (" + ", ".join(_differing(request.get("inputs"),
                                                                                         inputs)) + ")"}
                else:
                    start = time.perf_counter()
                    result = await pipeline.answer(str(question))
                    seconds = time.perf_counter() - start
                    reply = {"output": render(result, explain=options["explain"], as_json=options["json"],
                                              title=options["title"], seconds=seconds)}
                    click.echo(f"{len(result.answers)} answer(s) in {seconds:.1f} s: "
                               f"{json.dumps(str(question), ensure_ascii=False)}", err=True)
            writer.write(json.dumps(reply, ensure_ascii=False).encode() + b"\n")
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


def _differing(given: Any, served: dict[str, Any]) -> list[str]:
    """The settings inputs in which a request differs from the server's."""
    if not isinstance(given, dict):
        return ["none given"]
    return [key for key in served if given.get(key) != served[key]] or ["unknown"]
