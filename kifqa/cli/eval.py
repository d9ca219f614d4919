"""``kifqa eval``: answer a gold dataset and score it with the KIF-QA paper's metrics."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from kifqa.api import open_pipeline
from kifqa.cli.options import fail, load_settings, settings_options
from kifqa.errors import KifqaError
from kifqa.eval.datasets import GoldExtender, load_sqwd
from kifqa.eval.run import Evaluation, Scored, evaluate


@click.command("eval")
@click.option("--dataset", default="sqwd:valid", show_default=True,
              help="sqwd:valid or sqwd:train (SimpleQuestions-Wikidata, answerable questions).")
@click.option("--limit", type=int, help="Only the first N questions.")
@click.option("--concurrency", type=int, default=1, show_default=True, help="Questions in flight at once.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Write metrics.json and questions.jsonl here.")
@settings_options
def eval_(dataset: str, limit: int | None, concurrency: int, out: Path | None, config: Path | None,
          kb: str | None, model: str | None, examples: str | None) -> None:
    """Answer DATASET in-process and print precision, recall, F1, failure classes and costs."""
    settings = load_settings(config, kb, model, examples)
    name, _, split = dataset.partition(":")
    if name != "sqwd" or split not in ("valid", "train"):
        raise click.UsageError(f"unknown dataset {dataset!r}: use sqwd:valid or sqwd:train")

    def progress(s: Scored) -> None:
        t = s.result.trace
        sys.stderr.write(f"{s.gold.id}\tF1={s.score.f1:.2f}\t{s.failure or 'ok'}\t{s.gold.text}\t"
                         f"{' '.join(map(str, t.draft))}\t{t.error or ''}\n")

    async def run() -> Evaluation:
        questions = load_sqwd(settings.data_dir, split, limit=limit)
        async with open_pipeline(settings=settings) as pipeline:
            evaluation = await evaluate(pipeline, questions, GoldExtender(settings.data_dir),
                                        concurrency=concurrency, progress=progress)
        evaluation.extra = {"dataset": dataset, "model": settings.llm.model, "kb": settings.kb.spec,
                            "examples": f"{settings.examples.mode} k={settings.examples.k}",
                            "concurrency": concurrency}
        return evaluation

    try:
        evaluation = asyncio.run(run())
    except KifqaError as err:
        raise fail(err) from err
    if out is not None:
        evaluation.write(out)
    click.echo(json.dumps(evaluation.metrics(), indent=2))
