"""``kifqa bench warm``: ``kifqa model warm``'s few-shot block states computed by one model instance and by N
side by side, in one run.

Each side computes the same blocks (the configured example mode's, then the relation choice's system
prompt; ``--blocks`` keeps the first few) into an empty state folder of its own, so nothing is restored, with
the configured model, slots and threads. Its seconds exclude loading the instances, which the run before
the blocks pays once either way. Other work on the cores lowers the ratio, so the load average before and
after each side is printed with it, and the cores each side kept busy (this process's CPU seconds over its wall
seconds): a second instance that finds no free core keeps no more busy, and only an idle machine measures the
scaling.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click

from kifqa.cli.options import fail, load_settings
from kifqa.config import Settings
from kifqa.errors import KifqaError
from kifqa.llm.base import ChatRequest


@dataclass(frozen=True)
class Side:
    """One side of the comparison: its instance count, what warming took, and the load around it."""

    instances: int
    blocks: int
    load_s: float
    prepare_s: float
    prepare_cpu_s: float
    computed: int
    load_average: tuple[float, float]


@click.command()
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A YAML settings file.")
@click.option("--model", "name", help="Model name or path (default: llm.model).")
@click.option("--blocks", type=click.IntRange(1), help="Only the first N blocks (default: all of them).")
@click.option("--instances", type=click.IntRange(2),
              help="Instances of the second side (default: batch.llm_actors; auto = every core, at least 2).")
def warm(config: Path | None, name: str | None, blocks: int | None, instances: int | None) -> None:
    """Seconds to compute the few-shot blocks' KV states on 1 model instance and on N, and the ratio."""
    from kifqa.llm.factory import in_process_instances
    from kifqa.pipeline import warmup

    settings = load_settings(config, model=name)
    if settings.llm.backend != "local":
        raise click.UsageError("bench warm needs the local backend")
    try:
        requests = warmup.shared_prefixes(settings, warmup.embed_pools(settings))[:blocks]
        many = instances or max(2, in_process_instances(settings))
        sides = [measure(settings, requests, count) for count in (1, many)]
    except KifqaError as err:
        raise fail(err) from err
    click.echo(f"{settings.llm.model}: {len(requests)} block state(s) computed into empty folders, "
               f"{settings.llm.threads} thread(s) and {settings.llm.parallel} slot(s) per instance, "
               f"{os.cpu_count()} CPUs")
    click.echo(f"{'instances':>9} {'blocks':>6} {'load s':>7} {'blocks s':>9} {'blocks/min':>10} "
               f"{'cores busy':>10} {'load avg before/after':>22}")
    for side in sides:
        click.echo(f"{side.instances:>9} {side.computed:>6} {side.load_s:>7.1f} {side.prepare_s:>9.1f} "
                   f"{60 * side.computed / max(side.prepare_s, 1e-9):>10.2f} "
                   f"{side.prepare_cpu_s / max(side.prepare_s, 1e-9):>10.2f} "
                   f"{side.load_average[0]:>11.2f}/{side.load_average[1]:.2f}")
    one, more = sides
    click.echo(f"speed-up {one.prepare_s / max(more.prepare_s, 1e-9):.2f}x with {more.instances} instances "
               f"(goal >= 1.7x on 2 idle cores)")


def measure(settings: Settings, requests: list[ChatRequest], count: int) -> Side:
    """Warms ``requests`` on ``count`` fresh instances into a temporary state folder."""
    from kifqa.llm.factory import open_backend
    from kifqa.llm.local import LocalLLM
    from kifqa.llm.warm import warm as warm_blocks

    with tempfile.TemporaryDirectory(prefix="kifqa-bench-warm-") as folder:
        fresh = settings.override(llm={"block_dir": folder, "persist_blocks": True})
        models = [open_backend(fresh) for _ in range(count)]
        local = [m for m in models if isinstance(m, LocalLLM)]
        before = os.getloadavg()[0]
        try:
            done = warm_blocks(local, requests)
        finally:
            for m in local:
                asyncio.run(m.aclose())
        return Side(instances=count, blocks=len(requests), load_s=done.load_s, prepare_s=done.prepare_s,
                    prepare_cpu_s=done.prepare_cpu_s, computed=done.computed, load_average=(before, os.getloadavg()[0]))
