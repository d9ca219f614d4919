"""``kifqa examples``: the example pools (docs/architecture.md, "The example pool")."""

from __future__ import annotations

from pathlib import Path

import click

from kifqa.cli.options import fail, load_settings
from kifqa.errors import KifqaError


@click.group()
def examples() -> None:
    """The example pools: build (embed and cluster) one ahead of the runs that use it."""


@examples.command()
@click.argument("pool")
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A YAML settings file.")
@click.option("--kb", help="The base the pool is for (default: kb.spec); names the pool POOL `default` stands for.")
def build(pool: str, config: Path | None, kb: str | None) -> None:
    """Embed and cluster POOL once (`sqwd`, `sdbqa`, a pool file, or `default`: the base's own), with a progress
    bar: its embeddings (plain and masked) and few-shot blocks are cached under cache_dir/examples by the pool's
    content, where every later run over the same pool finds them. A pool file's bad rows are listed, one line
    each; the good rows are the pool."""
    from kifqa.pipeline.warmup import embed_pools

    settings = load_settings(config, kb)
    if pool != "default":
        settings = settings.override(examples={"pool": pool})
    if settings.examples.mode == "fixed":
        settings = settings.override(examples={"mode": "clustered"})
    try:
        source = embed_pools(settings)
    except KifqaError as err:
        raise fail(err) from err
    origin = source.origin  # its bad rows were logged as it was read, one line each
    click.echo(f"{origin.label}: {len(origin.examples)} examples ({len(origin.errors)} rows left out), "
               f"{len(source.shared_blocks())} few-shot blocks, cached under {settings.cache_dir / 'examples'}")
