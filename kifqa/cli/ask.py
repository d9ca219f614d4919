"""``kifqa ask``: answer questions and print the answers (and the traces), through a running
``kifqa serve`` where one has the same settings, in this process otherwise."""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click

from kifqa.cli.options import fail, load_settings, settings_options
from kifqa.cli.service import ask_served, printable, settings_inputs, socket_option
from kifqa.errors import KifqaError


@click.command()
@click.argument("questions", nargs=-1, required=True)
@settings_options
@click.option("--explain", is_flag=True, help="Also print the trace, step by step.")
@click.option("--json", "as_json", is_flag=True, help="Print the answers and the trace as JSON (one object a line).")
@click.option("--served/--here", default=True, show_default=True,
              help="Answer through a running kifqa serve with the same settings, if one listens on --socket.")
@socket_option
def ask(questions: tuple[str, ...], config: Path | None, kb: str | None, model: str | None,
        examples: str | None, explain: bool, as_json: bool, served: bool, socket_path: Path) -> None:
    """Answer each QUESTION in turn (``-`` reads one question a line from stdin; no Ray).

    A running ``kifqa serve`` with the same settings answers them, with its model and blocks already
    loaded; otherwise this process opens the pipeline (the defaults: the local KB and the local model,
    decoding on every idle core unless ``llm.threads`` is set).
    """
    title = len(questions) > 1 or questions == ("-",)
    pending = _questions(questions)
    if served:
        pending = ask_served(socket_path, settings_inputs(config, kb, model, examples), pending,
                             explain=explain, as_json=as_json, title=title)
    first = next(pending, None)
    if first is None:
        return
    settings = load_settings(config, kb, model, examples, idle_threads=True)

    async def run() -> None:
        from kifqa.api import open_pipeline
        from kifqa.cli.render import render

        async with open_pipeline(settings=settings) as pipeline:
            for question in itertools.chain([first], pending):
                start = time.perf_counter()
                result = await pipeline.answer(question)
                click.echo(printable(render(result, explain=explain, as_json=as_json, title=title,
                                            seconds=time.perf_counter() - start)))

    try:
        asyncio.run(run())
    except KifqaError as err:
        raise fail(err) from err


def _questions(arguments: tuple[str, ...]) -> Iterator[str]:
    """The questions: the arguments, ``-`` standing for stdin's lines (read as they come)."""
    for argument in arguments:
        lines = (line.strip() for line in sys.stdin) if argument == "-" else [argument]
        for text in lines:
            if text:
                # Bytes of the command line that are not UTF-8 reach Python as lone surrogates, which no
                # UTF-8 output (terminal, JSON, Parquet) can hold: decode them as U+FFFD instead.
                yield text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
