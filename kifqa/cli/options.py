"""Options shared by several commands, and turning them into :class:`Settings`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kifqa.config import Settings
from kifqa.errors import ConfigError, KifqaError


def settings_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--config``, ``--kb``, ``--model`` and ``--examples``."""
    for option in reversed([
        click.option("--config", "config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="A YAML settings file."),
        click.option("--kb", "kb", help="KB spec: local, local-server, local-hard, local-hard-server, local-dbpedia, "
                                        "local-dbpedia-server, wikidata, dbpedia, sparql+wikidata:URL, "
                                        "sparql+dbpedia:URL, kif:..."),
        click.option("--model", "model",
                     help="Model: qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, a .gguf path or a served name."),
        click.option("--examples", "examples", type=click.Choice(["clustered", "retrieved", "fixed"]),
                     help="Few-shot examples: a block shared by a cluster of training questions, the k most similar "
                          "training questions, or a fixed set."),
    ]):
        func = option(func)
    return func


def concurrency_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--concurrency``: questions in flight in-process (default: :attr:`LLMSettings.in_flight`)."""
    return click.option("--concurrency", type=click.IntRange(min=1), default=None,
                        help="Questions in flight at once (in-process); default: the model's slots "
                             "(llm.parallel), or llm.max_concurrency for a served model.")(func)


def load_settings(config: Path | None, kb: str | None = None, model: str | None = None,
                  examples: str | None = None) -> Settings:
    """Settings from the file and environment, with the command-line choices on top."""
    update: dict[str, Any] = {}
    if kb:
        update["kb"] = {"spec": kb}
    if model:
        update["llm"] = {"model": model}
    if examples:
        update["examples"] = {"mode": examples}
    try:
        return Settings.load(config).override(**update)
    except ConfigError as err:
        raise fail(err) from None


def fail(err: KifqaError) -> click.ClickException:
    """A kifqa error as a one-line command-line failure: exit status 2 for a :class:`ConfigError` (the
    command was given something wrong), 1 otherwise."""
    failure = click.ClickException(f"{type(err).__name__}: {err}")
    failure.exit_code = 2 if isinstance(err, ConfigError) else 1  # type: ignore[misc]  # click reads it per instance
    return failure
