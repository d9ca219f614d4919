"""Embeddings kept so that a text is encoded once: per process (:class:`Memo`, a shard's questions and
whatever its steps ask for) and per machine (:class:`SavedVectors`, the texts every question meets again:
the properties' names and descriptions, the drafts' predicates)."""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kifqa.examples.encoder import load_encoder
from kifqa.sqlite import connect_wal, private_dir, retry_busy, select_in

#: Embeddings :func:`memo` keeps (1.5 KB each).
KEPT = 16384

_SCHEMA = "CREATE TABLE IF NOT EXISTS vectors (text TEXT PRIMARY KEY, vector BLOB NOT NULL)"


class SavedVectors:
    """Embeddings on disk, shared by every process of the machine: an SQLite table under ``folder`` (made
    private to its owner, as kifqa's other caches) named for the encoder, so another encoder's never
    match; opened on first use. A row of the wrong size is taken as missing, and encoded again."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            encoder = load_encoder()
            self._db = connect_wal(private_dir(self.folder) / f"{encoder.identity}.sqlite", _SCHEMA)
        return self._db

    @retry_busy
    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The saved embeddings of those of ``texts`` that have one, by text."""
        with self._lock:
            db = self._open()
            rows = list(select_in(db, "SELECT text, vector FROM vectors WHERE text IN ({marks})", list(texts)))
        width = load_encoder().width
        return {t: np.frombuffer(v, np.float32) for t, v in rows if len(v) == 4 * width}

    @retry_busy
    def put(self, vectors: dict[str, np.ndarray]) -> None:
        """Saves ``vectors`` (text → embedding), replacing rows of the same texts."""
        with self._lock:
            self._open().executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                                     [(t, np.asarray(v, np.float32).tobytes()) for t, v in vectors.items()])


class Memo:
    """Embeddings of the last :data:`KEPT` texts asked for (thread-safe); the texts it does not keep are
    read from ``saved`` where given, and the rest encoded in one batch (one at a time costs the encoder 3-4×
    the CPU)."""

    def __init__(self, size: int = KEPT) -> None:
        self._size = size
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def vectors(self, texts: Sequence[str], *, saved: SavedVectors | None = None) -> list[np.ndarray]:
        """The unit-length embeddings of ``texts``, in order; those encoded now are saved to ``saved``."""
        with self._lock:
            found = {t: self._kept[t] for t in texts if t in self._kept}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if saved is not None and missing:
            found |= saved.get(missing)
        new = [t for t in missing if t not in found]
        if new:
            encoded = dict(zip(new, load_encoder().encode(new)))
            if saved is not None:
                saved.put(encoded)
            found |= encoded
        with self._lock:
            kept = self._kept
            for t, vector in found.items():
                kept[t] = vector
                kept.move_to_end(t)
            while len(kept) > self._size:
                kept.popitem(last=False)
        return [found[t] for t in texts]


@functools.cache
def memo() -> Memo:
    """The process's :class:`Memo`, shared by example selection and the relation step's ranking."""
    return Memo()
