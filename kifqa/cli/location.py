"""The click type of a corpus or run folder given on the command line: a local path or a URI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kifqa.runs.storage import is_uri


class Location(click.ParamType):
    """A local path (:class:`~pathlib.Path`, which must exist with ``exists``) or a URI that pyarrow's file
    systems open (``s3://bucket/key``, kept as a string and checked where it is opened)."""

    name = "path_or_uri"

    def __init__(self, *, exists: bool = False, dir_okay: bool = True, file_okay: bool = True) -> None:
        self._local = click.Path(exists=exists, dir_okay=dir_okay, file_okay=file_okay, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path | str:
        if isinstance(value, str) and is_uri(value):
            return value
        converted: Path = self._local.convert(value, param, ctx)
        return converted
