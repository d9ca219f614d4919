"""``kifqa check``: does this environment have what a job's settings need? (:mod:`kifqa.batch.preflight`)"""

from __future__ import annotations

from pathlib import Path

import click

from kifqa.cli.options import load_settings, settings_options


@click.command()
@settings_options
@click.option("--corpus", help="The corpus to check (path or URI); default batch.corpus of the config.")
@click.option("--out", help="The output folder to check (path or URI); default batch.out of the config.")
@click.option("--address", "ray_address", help="Ray cluster whose GPUs to count (auto, ray://host:10001).")
@click.option("--wait-gpus", "wait_gpus_s", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds to wait for an autoscaling cluster to add the GPUs the LLM actors need.")
def check(config: Path | None, kb: str | None, model: str | None, examples: str | None, corpus: str | None,
          out: str | None, ray_address: str | None, wait_gpus_s: float) -> None:
    """Check the extras, data, model, base, endpoints, Ray cluster, GPUs and output a job needs; one line per
    problem (exit 2)."""
    from kifqa.batch.preflight import preflight
    from kifqa.kb.spec import routes

    settings = load_settings(config, kb, model, examples)
    if ray_address:
        settings = settings.override(batch={"ray_address": ray_address})
    corpus = corpus or (str(settings.batch.corpus) if settings.batch.corpus else None)
    out = out or (str(settings.batch.out) if settings.batch.out else None)
    problems = preflight(settings, corpus=corpus, out=out, gpu_wait_s=wait_gpus_s)
    for problem in problems:
        click.echo(str(problem), err=True)
    if problems:
        raise SystemExit(2)
    click.echo("kifqa check: ready (extras, data, model, base, endpoints, cluster, GPUs, corpus and output)")
    for what, url in routes(settings.kb.spec, settings):
        click.echo(f"  {what}: {url}")
