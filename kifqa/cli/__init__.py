"""``kifqa``: the command line. Each command group lives in its own module of this package."""

from __future__ import annotations

import click

from kifqa.bench import bench
from kifqa.cli import ask, eval, kb, model, report, run, silver
from kifqa.errors import ConfigError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kifqa")
def cli() -> None:
    """Answer natural-language questions over knowledge graphs with KIF and LLMs."""


cli.add_command(ask.ask)
cli.add_command(bench)
cli.add_command(eval.eval_)
cli.add_command(kb.kb)
cli.add_command(model.model)
cli.add_command(report.report)
cli.add_command(run.run)
cli.add_command(silver.silver)


def main() -> None:
    """Runs the command line; a :class:`ConfigError` that no command caught ends it with one line and
    exit status 2, not a traceback."""
    try:
        cli()
    except ConfigError as err:
        click.echo(f"Error: ConfigError: {err}", err=True)
        raise SystemExit(2) from None
