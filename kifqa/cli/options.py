"""Options shared by several commands, and turning them into :class:`Settings`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kifqa.errors import ConfigError, KifqaError
from kifqa.redact import redact

if TYPE_CHECKING:
    from kifqa.config import Settings


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
                  examples: str | None = None, *, idle_threads: bool = False) -> Settings:
    """Settings from the file and environment, with the command-line choices on top; ``idle_threads``:
    where neither sets ``llm.threads``, the model decodes on every core the machine is not already busy
    with (:func:`idle_cores`), for a command that asks one question at a time."""
    from kifqa.config import Settings

    update: dict[str, Any] = {}
    if kb:
        update["kb"] = {"spec": kb}
    if model:
        update["llm"] = {"model": model}
    if examples:
        update["examples"] = {"mode": examples}
    try:
        loaded = Settings.load(config)
        if idle_threads and "threads" not in loaded.llm.model_fields_set:
            update.setdefault("llm", {})["threads"] = idle_cores()
        return loaded.override(**update)
    except ConfigError as err:
        raise fail(err) from None


def idle_cores(*, window_s: float = 0.2) -> int:
    """The cores not busy over the next ``window_s`` seconds (``/proc/stat``), at least 1; 1 where the
    system does not say (two llama.cpp threads beside a busy core decode slower than one; docs/llm.md)."""
    cores = os.cpu_count() or 1
    try:
        before = _cpu_ticks()
        time.sleep(window_s)
        after = _cpu_ticks()
    except (OSError, ValueError):
        return 1
    total, idle = (a - b for a, b in zip(after, before, strict=True))
    busy = cores * (1 - idle / total) if total > 0 else cores
    return max(1, min(cores, round(cores - busy)))


def _cpu_ticks() -> tuple[int, int]:
    """All CPU ticks so far and the idle ones (idle and waiting for I/O), from ``/proc/stat``."""
    with open("/proc/stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:]]
    return sum(fields[:8]), fields[3] + fields[4]


def fail(err: KifqaError) -> click.ClickException:
    """A kifqa error as a one-line command-line failure: exit status 2 for a :class:`ConfigError` (the
    command was given something wrong), 1 otherwise; the credentials of any URL in it masked."""
    failure = click.ClickException(redact(f"{type(err).__name__}: {err}"))
    failure.exit_code = 2 if isinstance(err, ConfigError) else 1  # type: ignore[misc]  # click reads it per instance
    return failure
