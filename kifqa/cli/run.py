"""``kifqa run``: answer a corpus of questions as a Ray batch job (see docs/batch.md)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from kifqa.cli.location import Location
from kifqa.cli.options import fail, load_settings, settings_options
from kifqa.config import Settings
from kifqa.errors import JobStopped, KifqaError


@click.command()
@click.argument("corpus", required=False, type=Location(exists=True, dir_okay=False))
@click.option("--out", type=Location(file_okay=False),
              help="Output folder (answers/, traces/, manifest.json), a path or a URI (s3://bucket/runs/x); "
                   "default batch.out of the config.")
@settings_options
@click.option("--resume/--no-resume", default=None,
              help="Skip the shards a previous run of the same job finished (default on); --no-resume starts "
                   "over and moves the previous job's files to previous-<time>/ in the output folder.")
@click.option("--retry-failed", is_flag=True, default=None, help="Rerun the questions whose trace has an error.")
@click.option("--shard-size", type=click.IntRange(min=1), help="Questions per shard (one Ray task).")
@click.option("--llm-actors", type=click.IntRange(min=1), help="LLM actors (one model each).")
@click.option("--kb-actors", type=click.IntRange(min=1), help="KB actors (one knowledge base each).")
@click.option("--address", "ray_address", help="Ray cluster to join (auto, ray://host:10001).")
@click.option("--progress/--no-progress", default=True, help="Show a progress bar.")
def run(corpus: Path | str | None, out: Path | str | None, config: Path | None, kb: str | None, model: str | None,
        examples: str | None, progress: bool, **batch: Any) -> None:
    """Answer every question of CORPUS (JSONL, CSV or Parquet, a path or a URI such as s3://bucket/q.parquet;
    default batch.corpus of the config)."""
    from kifqa.batch import run_job

    settings = _with_batch(load_settings(config, kb, model, examples), corpus=corpus, out=out, **batch)
    try:
        summary = run_job(settings, progress=progress)
    except JobStopped as stop:
        said = str(stop)
        click.echo(f"{said[:1].upper()}{said[1:]}; resume with: {_resume_command()}", err=True)
        raise SystemExit(128 + stop.signum) from None
    except KifqaError as err:
        raise fail(err) from err
    click.echo(summary.render())
    if not summary.ok:
        raise SystemExit(1)


def _with_batch(settings: Settings, **options: Any) -> Settings:
    """``settings`` with the batch options that were given."""
    given = {name: value for name, value in options.items() if value is not None}
    return settings.override(batch=given)


def _resume_command() -> str:
    """This command as typed, less ``--no-resume``: the command that resumes the job (resuming is the default)."""
    return shlex.join(["kifqa", *(arg for arg in sys.argv[1:] if arg != "--no-resume")])
