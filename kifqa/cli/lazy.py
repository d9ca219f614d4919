"""A click group whose commands are imported only when they run (each pulls in heavy dependencies)."""

from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    """A group of the commands ``lazy`` names as ``"module:attribute"``, imported on first use."""

    def __init__(self, *args: object, lazy: dict[str, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.lazy)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy:
            return None
        module, attribute = self.lazy[name].split(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), self.lazy[name]
        return command
