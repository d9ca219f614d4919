"""``kifqa ablate``: each rule of the pipeline switched off in turn, on each base, beside the defaults."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from kifqa.cli.options import concurrency_option, fail, load_settings
from kifqa.errors import KifqaError
from kifqa.eval.ablation import Row, table
from kifqa.llm.factory import in_process_instances


def _echo(row: Row) -> None:
    """One row of the table, as it is done."""
    click.echo(table([row]).splitlines()[-1], err=True)


@click.command("ablate")
@click.option("--dataset", default="sqwd:valid", show_default=True,
              help="A tuning set: sqwd:valid (its first 700 questions at most), sqwd:train slices, or a gold file.")
@click.option("--start", type=click.IntRange(min=0), default=0, show_default=True,
              help="Skip the dataset's first N questions.")
@click.option("--limit", type=int, default=200, show_default=True, help="Questions from --start.")
@click.option("--kb", "kbs", multiple=True, default=("local", "local-hard"), show_default=True,
              help="A base to measure on (repeat for several).")
@click.option("--off", "rules", multiple=True,
              help="Only these rules (repeat; default: every rule of kifqa.eval.ablation.SWITCHES).")
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A YAML settings file.")
@click.option("--model", help="Model: qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, a .gguf path or a served name.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the table here.")
@concurrency_option
def ablate(dataset: str, start: int, limit: int, kbs: tuple[str, ...], rules: tuple[str, ...], config: Path | None,
           model: str | None, out: Path | None, concurrency: int | None) -> None:
    """Answer the tuning set with the defaults, then with each rule switched off, on each base, and print macro F1,
    its change, the questions better and worse, and model calls per question (set llm.cache to replay the
    defaults' model answers)."""
    from kifqa.cli.eval import gold_extender
    from kifqa.eval.ablation import SWITCHES, ablated
    from kifqa.eval.datasets import load_gold

    if dataset == "sqwd:valid" and start + limit > 700:
        raise click.UsageError("valid 700 and on are held out: tune on valid 0-699 and train only")
    unknown = sorted(set(rules) - SWITCHES.keys())
    if unknown:
        raise click.UsageError(f"unknown rules {unknown}; known: {sorted(SWITCHES)}")
    settings = load_settings(config, model=model)
    concurrency = concurrency or settings.llm.in_flight * in_process_instances(settings)
    switches = {name: SWITCHES[name] for name in rules} if rules else SWITCHES
    try:
        questions = load_gold(dataset, settings.data_dir, limit=limit, start=start)
        rows = asyncio.run(ablated(settings, questions, gold_extender, kbs=list(kbs), switches=switches,
                                   concurrency=concurrency, progress=_echo))
    except KifqaError as err:
        raise fail(err) from err
    text = f"{dataset} {start}-{start + len(questions) - 1}\n\n{table(rows)}"
    if out is not None:
        out.write_text(text + "\n")
    click.echo(text)
