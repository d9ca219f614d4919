"""``kifqa silver --recheck DIR``: a release's queries executed again against a base, and the rows whose answers
changed since the release.

Wikidata changes daily: a release that can be checked against today's base (or a mirror) stays useful. Each row
gets a ``recheck`` outcome (:class:`Outcome`), the answers the base gives now, and those added and removed;
``recheck.parquet`` holds every row so, ``recheck.json`` the counts.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kifqa.errors import DataError
from kifqa.eval.reexecute import Reexecution, reexecute
from kifqa.eval.release import SPLITS
from kifqa.kb.base import KnowledgeBase
from kifqa.runs.storage import is_uri, local_path, open_input, write_file


class Outcome(StrEnum):
    """How a released row's query fared against the base today."""

    #: The same answers as released.
    SAME = "same"
    #: Other answers: some added, some removed, or both.
    CHANGED = "changed"
    #: The query could not be executed (the error is kept).
    FAILED = "failed"


RECHECK_SCHEMA = pa.schema([
    ("id", pa.string()), ("split", pa.string()), ("question", pa.string()), ("query", pa.string()),
    ("recheck", pa.string()), ("answers", pa.list_(pa.string())), ("answers_now", pa.list_(pa.string())),
    ("added", pa.list_(pa.string())), ("removed", pa.list_(pa.string())), ("error", pa.string()),
])


@dataclass(frozen=True)
class Recheck:
    """A recheck's rows (:data:`RECHECK_SCHEMA`) and counts."""

    rows: list[dict[str, Any]]
    kb: str
    date: str

    def counts(self) -> dict[str, int]:
        return {o.value: sum(r["recheck"] == o for r in self.rows) for o in Outcome}

    def render(self) -> str:
        counts = self.counts()
        lines = [f"rechecked {len(self.rows)} rows against {self.kb} on {self.date}: "
                 + ", ".join(f"{v} {k}" for k, v in counts.items())]
        lines += [f"  {r['id']}\t{r['recheck']}\t+{len(r['added'])} -{len(r['removed'])}\t{r['question']}"
                  for r in self.rows if r["recheck"] != Outcome.SAME]
        return "\n".join(lines)


def read_release(src: str | Path) -> list[dict[str, Any]]:
    """Every row of the release at ``src`` (its splits' Parquet files), with its split."""
    base = str(src).rstrip("/") if is_uri(src) else str(local_path(src))
    rows: list[dict[str, Any]] = []
    for name in SPLITS:
        try:
            with open_input(f"{base}/data/{name}.parquet") as f:
                rows += pq.read_table(f).to_pylist()
        except (FileNotFoundError, OSError) as err:
            raise DataError(f"{src} is not a kifqa release: no readable data/{name}.parquet ({err})") from None
    return rows


def _row(row: Mapping[str, Any], check: Reexecution) -> dict[str, Any]:
    outcome = Outcome.FAILED if check.error else Outcome.SAME if check.reproduced else Outcome.CHANGED
    return {"id": row["id"], "split": row["split"], "question": row["question"], "query": row["query"],
            "recheck": outcome.value, "answers": list(row["answers"]), "answers_now": sorted(check.found),
            "added": sorted(check.added), "removed": sorted(check.removed), "error": check.error}


async def recheck(rows: Sequence[Mapping[str, Any]], kb: KnowledgeBase) -> Recheck:
    """Each released row's query executed on ``kb`` and compared with its answers."""
    checks = await reexecute(kb, [(r["query"], r["answers"]) for r in rows])
    return Recheck([_row(r, c) for r, c in zip(rows, checks)], kb=kb.spec,
                   date=datetime.now(UTC).isoformat(timespec="seconds"))


def write_recheck(result: Recheck, out: str | Path) -> None:
    """``recheck.parquet`` (every row) and ``recheck.json`` (the counts) in ``out``."""
    base = str(out).rstrip("/") if is_uri(out) else str(local_path(out))
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(result.rows, schema=RECHECK_SCHEMA), sink)
    write_file(f"{base}/recheck.parquet", sink.getvalue())
    summary = {"kb": result.kb, "date": result.date, "rows": len(result.rows), **result.counts()}
    write_file(f"{base}/recheck.json", (json.dumps(summary, indent=2) + "\n").encode())
