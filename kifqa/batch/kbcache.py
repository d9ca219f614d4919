"""An on-disk cache of knowledge-base results, shared by the KB actors of all jobs on a machine.

One SQLite file (WAL mode, so several processes read and write it) maps a key made of the KB spec and
settings, the call and its arguments to the pickled result. Only successful calls are stored.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sqlite3
from pathlib import Path
from typing import Any

#: What :meth:`KBCache.get` returns for a key it does not hold.
MISS = object()


class KBCache:
    """Results of one knowledge base (``namespace``: its spec and settings) by call and arguments."""

    def __init__(self, path: Path, namespace: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=60.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        self._namespace = namespace

    def key(self, call: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        blob = json.dumps([self._namespace, call, args, kwargs], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> Any:
        """The stored result, or :data:`MISS`."""
        row = self._db.execute("SELECT value FROM results WHERE key = ?", (key,)).fetchone()
        return MISS if row is None else pickle.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        self._db.execute("INSERT OR REPLACE INTO results (key, value) VALUES (?, ?)",
                         (key, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)))

    def close(self) -> None:
        self._db.close()

