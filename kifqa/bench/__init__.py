"""``kifqa bench kb|llm|batch|actors|report|examples|warm|standins``: benchmarks that print ratios measured in one run.

This package owns the benchmarks; it sits beside the command line, above every library package, so
that no library module imports the command line. Each benchmark is a module with a click command of
its name: ``kb`` (stores and search), ``llm`` (the prefix cache), ``batch`` (the job at scale on the
gold model), ``actors`` (the job's scaling with LLM actors), ``report`` (the HTML report page),
``examples`` (the few-shot example modes side by side) and ``warm`` (``kifqa model warm`` on 1 and N
model instances); ``standins`` serves the stand-ins of the public knowledge bases
(:mod:`kifqa.bench.standins`).
"""

from __future__ import annotations

import click

from kifqa.cli.lazy import LazyGroup

#: Subcommand → the module holding a click command of that name.
_BENCHES = {name: f"kifqa.bench.{name}:{name}"
            for name in ("kb", "llm", "batch", "actors", "report", "examples", "warm")}
_BENCHES["standins"] = "kifqa.bench.standins.serve:standins"


@click.group(cls=LazyGroup, lazy=_BENCHES)
def bench() -> None:
    """Measure the KB layer, the model backend, the batch job at scale and its scaling with LLM actors,
    the HTML report at scale, or warming the model on every core."""
