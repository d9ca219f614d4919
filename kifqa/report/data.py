"""What the report page holds: one row per question (the shape of :meth:`kifqa.eval.scoring.Scored.row`),
turned into table columns (one JSON list per column) and trace records (read when a question opens).

A row needs ``id``, ``question``, ``labels`` (answer id → label) and ``trace``; a scored row also has
``gold``, ``precision``, ``recall``, ``f1``, ``scored``, ``failure`` and ``failure_detail``; a silver
row has ``confidence``. :func:`prediction_row` makes the row of a question that has no gold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kifqa.runs.results import Prediction
from kifqa.types import Trace

#: Step timings drawn as the latency plot (``total`` is the ``seconds`` column).
TIMED_STEPS = ("draft", "entities", "relations", "answers")

#: Candidates an opened question shows: the search's first ones and every kept one (the traces on
#: disk keep all of them, up to the search limit of 50; most of a trace's bytes are candidates).
CANDIDATES = 10

#: Answers a table row shows (and the search sees); an opened question shows all.
ANSWERS = 10

_BLANK = re.compile(r"_:[A-Za-z][A-Za-z0-9]*")


def outcome(trace: Trace, answers: Mapping[str, str]) -> str | None:
    """The class of a question without gold: ``error`` (any step failed), ``empty`` (no answer) or
    ``None`` (answered)."""
    if trace.error:
        return "error"
    return None if answers else "empty"


def prediction_row(p: Prediction, *, confidence: float | None = None) -> dict[str, Any]:
    """The page row of a question without gold (a plain run, silver data)."""
    row: dict[str, Any] = {"id": p.question_id, "question": p.trace.question, "labels": p.answers,
                           "scored": False, "failure": outcome(p.trace, p.answers), "trace": p.trace.to_dict()}
    if confidence is not None:
        row["confidence"] = confidence
    return row


def _answers(row: Mapping[str, Any]) -> list[list[str]]:
    return [[a, label or ""] for a, label in (row.get("labels") or {}).items()]


def _f1(row: Mapping[str, Any]) -> float | None:
    return row.get("f1") if row.get("scored") else None


def _seconds(value: Any) -> float | None:
    return round(float(value), 4) if isinstance(value, (int, float)) else None


def _side(row: Mapping[str, Any]) -> dict[str, Any]:
    """The table cells of one row (the columns every page has)."""
    t = row.get("trace") or {}
    timings = t.get("timings") or {}
    return {
        "answers": _answers(row)[:ANSWERS], "n_answers": len(row.get("labels") or {}), "f1": _f1(row),
        "failure": row.get("failure"),
        "error_step": t.get("error_step"), "seconds": _seconds(timings.get("total") or 0.0),
        "llm_calls": len(t.get("llm_calls") or []),
        **{f"t_{step}": _seconds(timings.get(step)) for step in TIMED_STEPS},
    }


def _filter(f: Any) -> Any:
    """A filter run as an opened question shows it: seconds to 0.1 ms, the SPARQL's blank-node labels
    (random per compilation: ``_:N`` and 32 hex digits) numbered in order of appearance."""
    if not isinstance(f, dict):
        return f
    names: dict[str, str] = {}
    sparql = _BLANK.sub(lambda m: names.setdefault(m.group(), f"_:b{len(names)}"), f.get("sparql") or "")
    return {**f, "seconds": _seconds(f.get("seconds")), "sparql": sparql}


def _shown(trace: Mapping[str, Any]) -> dict[str, Any]:
    """The trace as an opened question shows it: without the question (a table column), candidates
    cut to the first :data:`CANDIDATES` and the kept ones (scores to 3 decimals), seconds to 0.1 ms,
    filters as :func:`_filter`."""
    shown = {k: v for k, v in trace.items() if k not in ("question", "question_id")}
    shown["timings"] = {k: _seconds(v) for k, v in (trace.get("timings") or {}).items()}
    shown["filters"] = [_filter(f) for f in trace.get("filters") or []]
    shown["llm_calls"] = [{**c, "latency_s": _seconds(c.get("latency_s"))} if isinstance(c, dict) else c
                          for c in trace.get("llm_calls") or []]
    candidates = [{**c, "score": round(c["score"], 3)} if isinstance(c, dict) and isinstance(c.get("score"), float)
                  else c for c in trace.get("candidates") or []]
    kept = set(trace.get("entities") or [])
    shown["candidates"] = [c for i, c in enumerate(candidates)
                           if i < CANDIDATES or (isinstance(c, dict) and c.get("id") in kept)]
    if len(candidates) > CANDIDATES:
        shown["candidates_total"] = len(candidates)
    return shown


def _record(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a question shows when opened, besides its table cells."""
    scored = bool(row.get("scored"))
    return {"trace": _shown(row.get("trace") or {}), "more_answers": _answers(row)[ANSWERS:],
            "gold": row.get("gold") if scored else None,
            "precision": row.get("precision") if scored else None, "recall": row.get("recall") if scored else None,
            "detail": row.get("failure_detail")}


def _columns(cells: list[dict[str, Any]]) -> dict[str, list[Any]]:
    names = list(dict.fromkeys(k for c in cells for k in c))
    return {name: [c.get(name) for c in cells] for name in names}


def question_table(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    """The table columns and trace records of a run's questions, in row order."""
    cells, records = [], []
    for row in rows:
        side = _side(row)
        cell = {"id": row["id"], "question": row.get("question") or "", **side}
        if row.get("failure_detail"):
            cell["detail"] = row["failure_detail"]
        if row.get("confidence") is not None:
            cell["confidence"] = row["confidence"]
        cells.append(cell)
        records.append(_record(row))
    return _columns(cells), records


def _changed(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (set(a.get("labels") or {}) != set(b.get("labels") or {}) or a.get("failure") != b.get("failure")
            or _f1(a) != _f1(b))


def compare_table(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]], *, better: set[str],
                  worse: set[str]) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    """The questions of both runs (rows by id) whose answers, F1 or failure class differ, side by side;
    ``better`` and ``worse`` name those that improved or got worse in B."""
    cells, records = [], []
    for qid, x in a.items():
        y = b.get(qid)
        if y is None or not _changed(x, y):
            continue
        change = "better" if qid in better else "worse" if qid in worse else "changed"
        cell = {"id": qid, "question": x.get("question") or "", "change": change}
        for prefix, row in (("a_", x), ("b_", y)):
            cell.update({prefix + k: v for k, v in _side(row).items() if not k.startswith("t_")})
        cells.append(cell)
        records.append({"a": _record(x), "b": _record(y)})
    return _columns(cells), records
