"""SQLite helpers shared by kifqa's on-disk tables (the label index, the LLM record cache)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

#: Values bound per ``IN (...)`` list: below SQLite's limit on bound variables.
IN_CHUNK = 500


def select_in(con: sqlite3.Connection, query: str, values: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of ``query`` for every value of ``values``: ``query`` holds one ``{marks}`` in its
    ``IN ({marks})`` list, run once per chunk of :data:`IN_CHUNK` values."""
    for start in range(0, len(values), IN_CHUNK):
        chunk = values[start:start + IN_CHUNK]
        yield from con.execute(query.format(marks=",".join("?" * len(chunk))), chunk)
