"""Scored evaluation folders side by side, one row each (``kifqa eval --table DIR ...``).

Each row comes from a folder ``kifqa eval --out DIR`` wrote (``--oracle-drafts`` for the oracle
column): ``metrics.json`` for the scores, slices and wall time, ``questions.jsonl`` for the
precision when answered and the wrong answer sets over :data:`~kifqa.eval.failures.LARGE_ANSWER_SET`, so that
folders written by earlier versions of kifqa (without those figures) read the same way.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from kifqa.errors import KifqaError
from kifqa.eval.failures import LARGE_ANSWER_SET
from kifqa.eval.pools import PoolRecord

#: The table's columns: header and how a row's value is written.
COLUMNS = (
    ("run", "{}"), ("base", "{}"), ("pool", "{}"), ("n", "{}"), ("macro F1", "{:.3f}"), ("micro F1", "{:.3f}"),
    ("macro F1, oracle drafts", "{:.3f}"), ("F1, one (p, d)", "{:.3f}"), ("F1, several", "{:.3f}"),
    ("topic not named", "{}"), ("F1, topic named", "{:.3f}"),
    ("precision when answered", "{:.3f}"), (f"> {LARGE_ANSWER_SET} answers", "{}"),
    ("LLM calls / q", "{:.2f}"), ("s / q", "{:.2f}"),
)
#: The leading columns that name what a row is (left-aligned); the figures follow.
IDENTIFYING = 3


def row(folder: Path) -> dict[str, Any]:
    """The table's figures of one scored folder."""
    try:
        metrics = json.loads((folder / "metrics.json").read_text())
        rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as err:
        raise KifqaError(f"{folder}: not a scored evaluation folder ({err}); write one with kifqa eval --out") from err
    slices, oracle = metrics.get("slices", {}), metrics.get("oracle_drafts") or {}
    answered = [r["precision"] for r in rows if r.get("scored") and r.get("predicted")]
    n = len(rows) or 1
    return {
        "run": folder.name, "base": _base(metrics),
        "pool": PoolRecord.from_dict(metrics["pool"]).short if metrics.get("pool") else None,
        "n": metrics["questions"],
        "macro F1": metrics["all"]["macro_f1"], "micro F1": metrics["all"]["micro_f1"],
        "macro F1, oracle drafts": oracle.get("macro_f1_oracle_drafts"),
        "F1, one (p, d)": slices.get("one_relation", {}).get("all", {}).get("macro_f1"),
        "F1, several": slices.get("several_relations", {}).get("all", {}).get("macro_f1"),
        "topic not named": sum(r["names_topic"] is False for r in rows) if any("names_topic" in r for r in rows)
        else None,
        "F1, topic named": slices.get("topic_named", {}).get("all", {}).get("macro_f1"),
        "precision when answered": statistics.fmean(answered) if answered else None,
        f"> {LARGE_ANSWER_SET} answers": sum(len(r.get("predicted") or ()) > LARGE_ANSWER_SET and r["f1"] < 1
                                             for r in rows if r.get("scored")),
        "LLM calls / q": metrics.get("llm_calls_per_question"),
        "s / q": metrics["wall_s"] / n,
    }


def render(folders: list[Path]) -> str:
    """A Markdown table of ``folders``, one row each in the order given (``–`` where a figure is missing)."""
    lines = ["| " + " | ".join(h for h, _ in COLUMNS) + " |",
             "| " + " | ".join("---" if i < IDENTIFYING else "---:" for i in range(len(COLUMNS))) + " |"]
    for folder in folders:
        values = row(folder)
        cells = ("–" if values[h] is None else fmt.format(values[h]) for h, fmt in COLUMNS)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _base(metrics: dict[str, Any]) -> str:
    """The KB spec, and whose gold scored it where that is not the spec's own."""
    kb = metrics.get("kb", "")
    return f"{kb} (hard base's gold)" if metrics.get("gold") and not kb.startswith("local-hard") else kb
