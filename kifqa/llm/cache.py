"""Record/replay cache: answers stored in SQLite, keyed by model identity, messages and decoding.

``record`` answers from the cache when it can and stores the model's new answers; ``replay``
answers only from the cache (a miss is that request's error, and the model is never called, so a
lazy backend is never even loaded); ``off`` passes everything through. Only successful answers
are stored. The database runs in WAL mode with a busy timeout and retries, so several processes
(Ray workers) can record into one file at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from kifqa.llm.base import LLM, ChatRequest, Completion, Usage
from kifqa.llm.blockstate import BlockStats
from kifqa.sqlite import connect_wal, retry_busy, select_in

CacheMode = Literal["record", "replay", "off"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created REAL NOT NULL,
    usage TEXT
)
"""

#: What a recorded answer cost, kept as JSON in ``usage`` (files older than it lack the column), beside the
#: answer's token log probabilities (``logprobs``; entries recorded before them replay with none).
_RECORDED = ("cached_prompt_tokens", "latency_s", "prompt_s", "generation_s")


def request_key(identity: str, request: ChatRequest) -> tuple[str, str]:
    """The cache key of ``request`` to the model ``identity``, and the canonical JSON it hashes."""
    blob = json.dumps(
        {
            "model": identity,
            "messages": [[m.role, m.content] for m in request.messages],
            "grammar": request.grammar,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stop": list(request.stop),
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest(), blob


class CachedLLM(LLM):
    """Wraps an :class:`LLM` with a persistent record/replay cache."""

    def __init__(self, llm: LLM, *, path: Path, mode: CacheMode = "record") -> None:
        """Opens (creating if needed) the cache at ``path`` in front of ``llm``.

        Args:
            llm: The model answering misses; in ``replay`` mode it is never called.
            path: The SQLite file.
            mode: ``record``, ``replay`` or ``off``.
        """
        self.llm = llm
        self.path = Path(path)
        self.mode = mode
        self.identity = llm.identity
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        #: Whether the file's table has the ``usage`` column (files recorded before it lack it).
        self._usage = False
        if mode != "off":
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _owner_only(self.path)
            self._db = self._open()

    @retry_busy
    def _open(self) -> sqlite3.Connection:
        """Connects in WAL mode, creating the table; recording into an older file adds its ``usage``
        column, while replaying leaves the file's table as it is (its answers then have no recorded cost)."""
        db = connect_wal(self.path, _SCHEMA)
        self._usage = "usage" in {row[1] for row in db.execute("PRAGMA table_info(completions)")}
        if not self._usage and self.mode == "record":
            db.execute("ALTER TABLE completions ADD COLUMN usage TEXT")
            self._usage = True
        return db

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Cached answers where recorded; the rest from the model (``record``) or errors (``replay``)."""
        if self._db is None:
            return await self.llm.agenerate(requests)
        keys = [request_key(self.identity, r) for r in requests]
        found = await asyncio.to_thread(self._lookup, [k for k, _ in keys])
        results: list[Completion | None] = [found.get(k) for k, _ in keys]
        missing = [i for i, c in enumerate(results) if c is None]
        if missing and self.mode == "replay":
            for i in missing:
                results[i] = Completion(
                    error=f"replay cache miss: {self.path} has no answer for this request to {self.identity}"
                )
        elif missing:
            fresh = await self.llm.agenerate([requests[i] for i in missing])
            rows = []
            for i, completion in zip(missing, fresh, strict=True):
                results[i] = completion
                if completion.ok:
                    rows.append((keys[i][0], keys[i][1], completion))
            if rows:
                await asyncio.to_thread(self._store, rows)
        return [c for c in results if c is not None]

    @retry_busy
    def _lookup(self, keys: list[str]) -> dict[str, Completion]:
        """Recorded completions for those of ``keys`` that are cached."""
        assert self._db is not None
        found: dict[str, Completion] = {}
        with self._lock:
            for key, text, prompt_tokens, completion_tokens, cost in select_in(
                self._db,
                f"SELECT key, text, prompt_tokens, completion_tokens, {'usage' if self._usage else 'NULL'} "
                "FROM completions WHERE key IN ({marks})",
                keys,
            ):
                counts = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
                blob = json.loads(cost) if cost else {}
                logprobs = tuple(blob.pop("logprobs", None) or ())
                recorded = Usage(**counts, **blob) if blob else None
                usage = Usage(**counts, cache_hit=True, recorded=recorded)
                found[key] = Completion(text=text, usage=usage, logprobs=logprobs)
        return found

    @retry_busy
    def _store(self, rows: list[tuple[str, str, Completion]]) -> None:
        """Writes new answers in one transaction."""
        assert self._db is not None
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # busy here: nothing to roll back, retried
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO completions (key, model, request, text, prompt_tokens,"
                    " completion_tokens, created, usage) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (key, self.identity, blob, c.text, c.usage.prompt_tokens, c.usage.completion_tokens, now,
                         json.dumps({**{name: getattr(c.usage, name) for name in _RECORDED},
                                     "logprobs": list(c.logprobs)}))
                        for key, blob, c in rows
                    ],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    async def aload(self) -> None:
        """Loads the model, unless it is never called (``replay``)."""
        if self.mode != "replay":
            await self.llm.aload()

    def blocks(self) -> BlockStats | None:
        return self.llm.blocks()

    async def aclose(self) -> None:
        """Closes the database and the wrapped model."""
        if self._db is not None:
            with self._lock:
                self._db.close()
                self._db = None
        await self.llm.aclose()


def _owner_only(path: Path) -> None:
    """Tightens a record file of this user's (and its ``-wal``/``-shm`` files) to 0600: it holds prompts and
    answers. A file of another user's is left as it is (replaying a shared cassette)."""
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            info = file.stat()
        except FileNotFoundError:
            continue
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            file.chmod(0o600)
