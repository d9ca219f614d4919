"""An on-disk cache of knowledge-base results, shared by the KB actors of all jobs on a machine.

One SQLite file (WAL mode, so several processes read and write it) in a private folder (mode 0700) maps a
key made of the knowledge base's identity (spec, settings, the hash of the build it reads, the code), the
call and its arguments to the result as JSON: data only, decoded into the KB's own types, never code.
Only successful calls are stored (not a search that failed on the way, :class:`~kifqa.kb.base.Hits`). Every
SQLite call runs in a worker thread, retried while another process
holds the lock; a cache that cannot be read or written is a miss or a skipped write (logged), never the
call's error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kifqa.kb.base import EntityProperties, FilterResult, Hits, PropertyUse
from kifqa.sqlite import connect_wal, private_dir, retry_busy
from kifqa.types import Candidate, Fact

_logger = logging.getLogger(__name__)

#: What :meth:`KBCache.get` returns for a key it does not hold.
MISS = object()

#: The version of the stored results' form, part of every key: rows of another form are never read
#: (version 2: ``properties_of`` gives each property's value type).
FORMAT = 2

_SCHEMA = "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


def _candidate(d: dict[str, Any]) -> Candidate:
    return Candidate(**{**d, "aliases": tuple(d["aliases"])})


def _filter_result(d: dict[str, Any]) -> FilterResult:
    return FilterResult(**{**d, "facts": tuple(Fact(**f) for f in d["facts"])})


#: Each cached call's result type, from its JSON form.
DECODE: dict[str, Callable[[Any], Any]] = {
    "search_entities": lambda rows: [_candidate(r) for r in rows],
    "search_properties": lambda rows: [_candidate(r) for r in rows],
    "properties_of": lambda d: EntityProperties(
        uses=tuple(PropertyUse(**{**u, "property": _candidate(u["property"])}) for u in d["uses"]),
                               truncated=d["truncated"]),
    "facts": _filter_result,
    "labels": dict,
    "named": lambda names: names,  # a list, or None where the base cannot tell
}


def encode(value: Any) -> str:
    """A KB call's result as JSON (dataclasses as objects, tuples as lists)."""
    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return dataclasses.asdict(v)
        raise TypeError(f"cannot cache a {type(v).__name__}")
    return json.dumps(value, default=plain, ensure_ascii=False)


class KBCache:
    """Results of one knowledge base (``namespace``: its identity) by call and arguments, in
    ``<folder>/results.sqlite``."""

    def __init__(self, folder: Path, namespace: str, *, busy_timeout_s: float = 30.0) -> None:
        self.path = private_dir(folder) / "results.sqlite"
        self._db = connect_wal(self.path, _SCHEMA, timeout_s=busy_timeout_s)
        self._lock = threading.Lock()
        self._namespace = namespace

    async def answer(self, call: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                     compute: Callable[[], Awaitable[Any]]) -> tuple[Any, bool]:
        """The result of ``call`` from the cache, else from ``compute`` (then stored); and whether it was
        a hit. Only ``compute`` can fail: a cache that cannot be read or written is skipped."""
        key = self.key(call, args, kwargs)
        value = await self.get(call, key)
        if value is not MISS:
            return value, True
        value = await compute()
        if not (isinstance(value, Hits) and value.failed):  # a search that failed on the way is asked again
            await self.put(key, value)
        return value, False

    def key(self, call: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        blob = json.dumps([FORMAT, self._namespace, call, args, kwargs], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    async def get(self, call: str, key: str) -> Any:
        """The stored result of ``call`` under ``key``, or :data:`MISS` (also when the cache cannot be read)."""
        try:
            row = await asyncio.to_thread(self._select, key)
        except sqlite3.Error as err:
            _logger.warning("KB cache %s unreadable, answering without it: %s", self.path, err)
            return MISS
        if row is None:
            return MISS
        try:
            return DECODE[call](json.loads(row))
        except (ValueError, TypeError, KeyError) as err:  # a row of another version: recompute it
            _logger.warning("KB cache %s: undecodable %s row, recomputed: %s", self.path, call, err)
            return MISS

    async def put(self, key: str, value: Any) -> bool:
        """Stores ``value``; False (logged) when the cache cannot be written: the result stands regardless."""
        try:
            await asyncio.to_thread(self._insert, key, encode(value))
        except sqlite3.Error as err:
            _logger.warning("KB cache %s not written (%s); the result is used uncached", self.path, err)
            return False
        return True

    @retry_busy
    def _select(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM results WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @retry_busy
    def _insert(self, key: str, blob: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO results (key, value) VALUES (?, ?)", (key, blob))

    def close(self) -> None:
        with self._lock:
            self._db.close()
