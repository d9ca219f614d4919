"""SQLite helpers shared by kifqa's on-disk tables (the label index, the LLM record cache, the KB cache)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

#: Values bound per ``IN (...)`` list: below SQLite's limit on bound variables.
IN_CHUNK = 500


def select_in(con: sqlite3.Connection, query: str, values: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of ``query`` for every value of ``values``: ``query`` holds one ``{marks}`` in its
    ``IN ({marks})`` list, run once per chunk of :data:`IN_CHUNK` values."""
    for start in range(0, len(values), IN_CHUNK):
        chunk = values[start:start + IN_CHUNK]
        yield from con.execute(query.format(marks=",".join("?" * len(chunk))), chunk)


def busy(error: BaseException) -> bool:
    """True for SQLite's 'database is locked/busy'."""
    return isinstance(error, sqlite3.OperationalError) and ("locked" in str(error) or "busy" in str(error))


#: Retries a call that met another process's lock ("database is locked") beyond the busy timeout.
retry_busy = retry(
    retry=retry_if_exception(busy),
    stop=stop_after_attempt(8),
    wait=wait_random_exponential(multiplier=0.05, max=2.0),
    reraise=True,
)


@retry_busy
def connect_wal(path: Path, schema: str, *, timeout_s: float = 30.0) -> sqlite3.Connection:
    """A connection to ``path`` in WAL mode (several processes read and write it), ``schema`` created if needed;
    usable from any thread (callers serialize their use of it). A new file is created 0600 (SQLite gives its
    ``-wal`` and ``-shm`` files the same mode): it may hold questions and prompts."""
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    db = sqlite3.connect(path, timeout=timeout_s, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(schema)
    return db


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner can read or write (created with mode 0700, tightened to it if it
    exists); :class:`PermissionError` if another user owns it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user; a cache must be in a folder of its own")
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path
