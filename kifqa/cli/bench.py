"""``kifqa bench kb|llm|batch|actors|report``: benchmarks that print ratios measured in one run."""

from __future__ import annotations

import importlib

import click

#: Subcommand → the module holding a click command of that name.
_BENCHES = {"kb": "kifqa.kb.bench", "llm": "kifqa.llm.bench", "batch": "kifqa.batch.bench_scale",
            "actors": "kifqa.batch.bench", "report": "kifqa.report.bench"}


class _LazyGroup(click.Group):
    """Imports a benchmark's module only when it runs (each pulls in heavy dependencies)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_BENCHES)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in _BENCHES:
            return None
        return getattr(importlib.import_module(_BENCHES[name]), name)


@click.group(cls=_LazyGroup)
def bench() -> None:
    """Measure the KB layer, the model backend, the batch job at scale and its scaling with LLM actors,
    or the HTML report at scale."""
