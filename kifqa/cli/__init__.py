"""``kifqa``: the command line. Each command group lives in its own module of this package, imported
only when it runs (``kifqa ask`` through a running ``kifqa serve`` imports neither KIF nor the model)."""

from __future__ import annotations

import click

from kifqa.cli.lazy import LazyGroup
from kifqa.errors import ConfigError
from kifqa.redact import mask_stdio

#: Command → where it lives.
COMMANDS = {"ask": "kifqa.cli.ask:ask", "bench": "kifqa.bench:bench", "check": "kifqa.cli.check:check",
            "eval": "kifqa.cli.eval:eval_", "examples": "kifqa.cli.examples:examples",
            "kb": "kifqa.cli.kb:kb", "model": "kifqa.cli.model:model", "report": "kifqa.cli.report:report",
            "run": "kifqa.cli.run:run", "serve": "kifqa.cli.service:serve", "silver": "kifqa.cli.silver:silver",
            "ablate": "kifqa.cli.ablate:ablate"}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kifqa")
def cli() -> None:
    """Answer natural-language questions over knowledge graphs with KIF and LLMs."""


def main() -> None:
    """Runs the command line; a :class:`ConfigError` that no command caught ends it with one line and
    exit status 2, not a traceback. Everything it prints is redacted (:func:`~kifqa.redact.mask_stdio`)."""
    mask_stdio()
    try:
        cli()
    except ConfigError as err:
        click.echo(f"Error: ConfigError: {err}", err=True)
        raise SystemExit(2) from None
