"""``kifqa ask``: answer questions in-process and print the answers (and the traces)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click

from kifqa.api import open_pipeline
from kifqa.cli.options import fail, load_settings, settings_options
from kifqa.errors import KifqaError
from kifqa.types import Result, Trace


@click.command()
@click.argument("questions", nargs=-1, required=True)
@settings_options
@click.option("--explain", is_flag=True, help="Also print the trace, step by step.")
@click.option("--json", "as_json", is_flag=True, help="Print the answers and the trace as JSON (one object a line).")
def ask(questions: tuple[str, ...], config: Path | None, kb: str | None, model: str | None,
        examples: str | None, explain: bool, as_json: bool) -> None:
    """Answer each QUESTION in turn, in one process (``-`` reads one question a line from stdin; no Ray;
    the defaults are the local KB and the local model, decoding on every idle core unless
    ``llm.threads`` is set)."""
    settings = load_settings(config, kb, model, examples, idle_threads=True)

    async def run() -> None:
        async with open_pipeline(settings=settings) as pipeline:
            for question in _questions(questions):
                start = time.perf_counter()
                result = await pipeline.answer(question)
                _show(result, explain=explain, as_json=as_json, title=len(questions) > 1 or questions == ("-",),
                      seconds=time.perf_counter() - start)

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


def _show(result: Result, *, explain: bool, as_json: bool, title: bool, seconds: float) -> None:
    """Prints one question's answers (and trace)."""
    if as_json:
        click.echo(json.dumps({"answers": result.answer_rows(), "trace": result.trace.to_dict()},
                              ensure_ascii=False, indent=None if title else 2))
        return
    if title:
        click.echo(f"# {result.question.text}  ({seconds:.1f} s)")
    if explain:
        click.echo(render_trace(result.trace))
        click.echo()
    click.echo(render_answers(result))


def render_answers(result: Result) -> str:
    """One line per answer: its id, label and the statement behind it."""
    if not result.answers:
        why = f" ({result.trace.error_step}: {result.trace.error})" if result.trace.error else ""
        return f"no answer{why}"
    return "\n".join(
        f"{a.answer}\t{a.answer_label}\t({a.fact.subject_label} | {a.fact.property_label} | "
        f"{a.fact.value_label})" for a in result.answers)


def render_trace(trace: Trace) -> str:
    """The trace as readable lines, one block per step."""
    lines = [f"question  {trace.question}", f"kb        {trace.kb}", f"model     {trace.model}"]
    if trace.examples:
        lines.append(f"examples  {len(trace.examples)}: " + " / ".join(trace.examples))
    if trace.draft:
        lines.append("draft     " + "  ".join(str(p) for p in trace.draft))
    if trace.candidates:
        kept = set(trace.entities)
        lines.append("entities")
        for c in trace.candidates[:10]:
            mark = "*" if c.id in kept else " "
            extra = f" aka {'; '.join(c.aliases[:3])}" if c.aliases else ""
            lines.append(f"  {mark} {c.id:<12} {c.score:6.2f}  {c.label}{extra}")
    if trace.relations:
        lines.append("relations " + ", ".join(f"{r.entity} {r.property} {r.direction}" for r in trace.relations)
                     + f"  (of {len(trace.options)} options)")
    for f in trace.filters:
        lines.append(f"filter    {f.filter}  -> {f.n_statements} statements in {f.seconds * 1000:.0f} ms")
        if f.sparql:
            lines.extend("          " + line for line in f.sparql.splitlines())
    for call in trace.llm_calls:
        cached = " (cache hit)" if call.cache_hit else ""
        lines.append(f"llm       {call.step}: {call.prompt_tokens} prompt ({call.cached_prompt_tokens} "
                     f"prefix-cached) + {call.completion_tokens} tokens, {call.latency_s:.2f} s{cached} "
                     f"-> {call.output!r}")
    lines.extend(f"note      {n}" for n in [*trace.notes, *map(str, trace.constraints)])
    lines.append("timings   " + ", ".join(f"{k} {v:.3f} s" for k, v in trace.timings.items()))
    lines.append(f"kb calls  {trace.kb_calls}")
    if trace.error:
        lines.append(f"error     {trace.error_step}: {trace.error}")
    return "\n".join(lines)
