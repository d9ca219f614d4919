"""Two scored runs side by side: metric deltas, and which questions got better or worse."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from kifqa.errors import DataError

#: (label, path in metrics.json) of the metrics compared.
METRICS = [
    ("macro F1", ("all", "macro_f1")), ("macro precision", ("all", "macro_precision")),
    ("macro recall", ("all", "macro_recall")), ("micro F1", ("all", "micro_f1")),
    ("micro precision", ("all", "micro_precision")), ("micro recall", ("all", "micro_recall")),
    ("single-answer macro F1", ("single_answer", "macro_f1")),
    ("single-answer micro F1", ("single_answer", "micro_f1")),
    ("entity linking", ("linking", "entity", "accuracy")), ("relation linking", ("linking", "relation", "accuracy")),
    ("LLM calls / question", ("llm_calls_per_question",)), ("seconds / question", ("seconds_per_question",)),
]


def load_scored(folder: str | Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The metrics and per-question rows (by id) of an evaluation folder (``metrics.json`` and
    ``questions.jsonl``, as ``kifqa eval --out`` writes them)."""
    folder = Path(folder)
    try:
        metrics = json.loads((folder / "metrics.json").read_text())
        rows = {}
        with (folder / "questions.jsonl").open() as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    row.pop("trace", None)
                    rows[row["id"]] = row
    except (OSError, ValueError, KeyError) as err:
        raise DataError(f"{folder} is not a scored evaluation folder (metrics.json, questions.jsonl): {err}") from err
    return metrics, rows


def _get(m: dict[str, Any], path: tuple[str, ...]) -> float | None:
    for key in path:
        if not isinstance(m, dict) or key not in m:
            return None
        m = m[key]
    return m if isinstance(m, (int, float)) else None


def _state(row: dict[str, Any]) -> str:
    return row.get("failure") or "ok"


def compare(a: tuple[dict[str, Any], dict[str, dict[str, Any]]], b: tuple[dict[str, Any], dict[str, dict[str, Any]]],
            *, names: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """Compares two scored runs (``(metrics, rows by id)`` as :func:`load_scored` gives them)."""
    (ma, ra), (mb, rb) = a, b
    metrics = []
    for label, path in METRICS:
        va, vb = _get(ma, path), _get(mb, path)
        metrics.append({"metric": label, "a": va, "b": vb,
                        "delta": round(vb - va, 4) if va is not None and vb is not None else None})
    for cls in ma.get("failure_counts", {}) | mb.get("failure_counts", {}):
        va, vb = ma.get("failure_counts", {}).get(cls), mb.get("failure_counts", {}).get(cls)
        metrics.append({"metric": f"failures: {cls}", "a": va, "b": vb,
                        "delta": vb - va if va is not None and vb is not None else None})
    common = [qid for qid in ra if qid in rb]
    better: list[dict[str, Any]] = []
    worse: list[dict[str, Any]] = []
    transitions: Counter[str] = Counter()
    for qid in common:
        x, y = ra[qid], rb[qid]
        if _state(x) != _state(y):
            transitions[f"{_state(x)} → {_state(y)}"] += 1
        if not (x.get("scored", True) and y.get("scored", True)):
            la, lb = _linked(x), _linked(y)
            if la != lb:
                (better if lb > la else worse).append(_pair(x, y, la, lb))
            continue
        fa, fb = x.get("f1", 0.0), y.get("f1", 0.0)
        if fb > fa + 1e-9:
            better.append(_pair(x, y, fa, fb))
        elif fb < fa - 1e-9:
            worse.append(_pair(x, y, fa, fb))
    better.sort(key=lambda r: (r["a"] - r["b"], r["id"]))
    worse.sort(key=lambda r: (r["b"] - r["a"], r["id"]))
    return {
        "names": list(names), "metrics": metrics,
        "questions": {"a": len(ra), "b": len(rb), "common": len(common), "better": len(better), "worse": len(worse),
                      "same": len(common) - len(better) - len(worse)},
        "transitions": dict(transitions.most_common()),
        "better": better, "worse": worse,
    }


def _linked(row: dict[str, Any]) -> float:
    link = row.get("linking") or {}
    return float(sum(bool(link.get(k)) for k in ("entity", "relation")))


def _pair(x: dict[str, Any], y: dict[str, Any], va: float, vb: float) -> dict[str, Any]:
    return {"id": x["id"], "question": x.get("question", ""), "a": va, "b": vb,
            "failure_a": x.get("failure"), "failure_b": y.get("failure"),
            "predicted_a": x.get("predicted", [])[:5], "predicted_b": y.get("predicted", [])[:5]}


def _v(x: Any) -> str:
    if x is None:
        return "–"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def render(c: dict[str, Any], *, show: int = 20) -> str:
    """The comparison as Markdown (tables side by side; ``show`` questions per list)."""
    a, b = c["names"]
    q = c["questions"]
    lines = [f"# {a} vs {b}", "", f"A = `{a}`, B = `{b}`; {q['common']} questions in both "
             f"({q['a']} in A, {q['b']} in B): {q['better']} better in B, {q['worse']} worse, "
             f"{q['same']} the same.", "",
             "| metric | A | B | B − A |", "| --- | ---: | ---: | ---: |"]
    for m in c["metrics"]:
        d = m["delta"]
        lines.append(f"| {m['metric']} | {_v(m['a'])} | {_v(m['b'])} | "
                     f"{'–' if d is None else (f'{d:+.3f}' if isinstance(d, float) else f'{d:+d}')} |")
    if c["transitions"]:
        lines += ["", "Failure class changes (A → B): " + ", ".join(f"{k}: {v}" for k, v in c["transitions"].items())]
    for key, title in (("better", "Better in B"), ("worse", "Worse in B")):
        rows = c[key]
        lines += ["", f"## {title} ({len(rows)})", ""]
        if not rows:
            lines.append("none")
            continue
        lines += ["| id | question | A | B | A class | B class | A answers | B answers |",
                  "| --- | --- | ---: | ---: | --- | --- | --- | --- |"]
        for r in rows[:show]:
            lines.append(f"| `{r['id']}` | {str(r['question']).replace('|', '/')} | {r['a']:.2f} | {r['b']:.2f} | "
                         f"{r['failure_a'] or 'ok'} | {r['failure_b'] or 'ok'} | {' '.join(r['predicted_a'])} | "
                         f"{' '.join(r['predicted_b'])} |")
        if len(rows) > show:
            lines.append(f"| … | {len(rows) - show} more | | | | | | |")
    return "\n".join(lines) + "\n"
