"""The layout of a run folder: ``answers/`` and ``traces/`` Parquet (one file per shard) and ``manifest.json``.

A shard's files are written to temporary names and renamed into place, answers first and traces
last: a shard is finished exactly when its traces file exists, so a job killed at any point leaves
only finished shards (and stray temporary files, which are ignored and cleaned up).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kifqa.runs.schema import ANSWER_SCHEMA, TRACE_SCHEMA

_TMP = ".tmp-"


class RunFolder:
    """Reads and writes the files of one run folder (the output of a job)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).absolute()
        self.answers = self.root / "answers"
        self.traces = self.root / "traces"
        self.manifest = self.root / "manifest.json"

    def create(self) -> None:
        self.answers.mkdir(parents=True, exist_ok=True)
        self.traces.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def shard_file(index: int) -> str:
        return f"shard-{index:05d}.parquet"

    def finished(self) -> set[int]:
        """Indices of the shards whose files are complete."""
        if not self.traces.is_dir():
            return set()
        return {int(p.stem.removeprefix("shard-")) for p in self.traces.glob("shard-*.parquet")}

    def write_shard(self, index: int, answers: pa.Table, traces: pa.Table) -> None:
        """Writes both files of shard ``index`` atomically (traces last: they mark it finished)."""
        name = self.shard_file(index)
        _write_atomic(answers.cast(ANSWER_SCHEMA), self.answers / name)
        _write_atomic(traces.cast(TRACE_SCHEMA), self.traces / name)

    def read_shard(self, index: int) -> tuple[pa.Table, pa.Table]:
        """The answers and traces of a finished shard."""
        name = self.shard_file(index)
        return (pq.read_table(self.answers / name, schema=ANSWER_SCHEMA),
                pq.read_table(self.traces / name, schema=TRACE_SCHEMA))

    def read_traces(self, columns: list[str] | None = None) -> pa.Table:
        """All finished shards' trace rows."""
        return self._read(self.traces, TRACE_SCHEMA, columns)

    def read_answers(self, columns: list[str] | None = None) -> pa.Table:
        """All finished shards' answer rows (an unfinished shard's answers file is left out)."""
        return self._read(self.answers, ANSWER_SCHEMA, columns)

    def count_answers(self) -> int:
        """How many answer rows the finished shards hold, from the Parquet footers (reads no rows:
        a large job's driver stays small)."""
        return sum(pq.read_metadata(self.answers / self.shard_file(i)).num_rows for i in self.finished())

    def trace_shards(self, columns: list[str] | None = None) -> Iterator[pa.Table]:
        """Each finished shard's trace rows, one shard at a time."""
        return self._shards(self.traces, _columns(TRACE_SCHEMA, columns), columns)

    def _read(self, folder: Path, schema: pa.Schema, columns: list[str] | None) -> pa.Table:
        schema = _columns(schema, columns)
        tables = list(self._shards(folder, schema, columns))
        return pa.concat_tables(tables) if tables else schema.empty_table()

    def _shards(self, folder: Path, schema: pa.Schema, columns: list[str] | None) -> Iterator[pa.Table]:
        for i in sorted(self.finished()):
            yield pq.read_table(folder / self.shard_file(i), columns=columns, schema=schema)

    def failed(self, index: int) -> set[str]:
        """Ids of the questions of a finished shard whose trace has an error other than bad input."""
        traces = pq.read_table(self.traces / self.shard_file(index),
                               columns=["question_id", "error", "error_step"])
        errors = pc.and_(pc.is_valid(traces["error"]),
                         pc.fill_null(pc.not_equal(traces["error_step"], "input"), True))
        return set(traces.filter(errors)["question_id"].to_pylist())

    def clear(self) -> None:
        """Removes every shard file (a fresh start)."""
        for folder in (self.answers, self.traces):
            if folder.is_dir():
                for path in folder.iterdir():
                    if path.name.startswith(("shard-", _TMP)):
                        path.unlink()

    def remove_temporaries(self) -> None:
        for folder in (self.answers, self.traces):
            if folder.is_dir():
                for path in folder.glob(f"{_TMP}*"):
                    path.unlink(missing_ok=True)

    def read_manifest(self) -> dict[str, Any] | None:
        """The manifest; ``None`` when there is none yet."""
        return json.loads(self.manifest.read_text()) if self.manifest.is_file() else None

    def manifest_or_empty(self) -> dict[str, Any]:
        """The manifest for readers of a finished run: ``{}`` when it is missing or unreadable."""
        try:
            manifest = self.read_manifest()
        except (OSError, ValueError):
            return {}
        return manifest if isinstance(manifest, dict) else {}

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.root / f"{_TMP}{uuid.uuid4().hex}-manifest.json"
        tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n")
        os.replace(tmp, self.manifest)


def _columns(schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    """``schema`` cut to ``columns`` (all of it for ``None``)."""
    return schema if columns is None else pa.schema([schema.field(c) for c in columns])


def _write_atomic(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f"{_TMP}{uuid.uuid4().hex}-{path.name}")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)

