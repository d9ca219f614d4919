"""What a run said about each question, from either source: in-process :class:`Result` objects or a
batch run folder (``answers/`` and ``traces/`` Parquet). Everything downstream (scores, failure
classes, linking accuracy, reports, silver data) reads the same :class:`Prediction`: the predicted
answers with their labels, and the trace as the dict of :meth:`kifqa.types.Trace.to_dict`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kifqa.errors import DataError
from kifqa.types import UNKNOWN, Result

#: Step timings of a trace, in pipeline order (``total`` is the whole question).
STEPS = ("draft", "entities", "relations", "answers", "total")


@dataclass
class Prediction:
    """One question's predicted answers (id or value → label) and trace (a dict)."""

    question_id: str
    answers: dict[str, str]
    trace: dict[str, Any]
    #: Labels of the properties of the answer statements (property id → label).
    property_labels: dict[str, str] = field(default_factory=dict)

    @property
    def answer_set(self) -> set[str]:
        return set(self.answers)

    @classmethod
    def from_result(cls, result: Result) -> Prediction:
        answers: dict[str, str] = {}
        props: dict[str, str] = {}
        for a in result.answers:
            answers.setdefault(a.answer, a.answer_label)
            props.setdefault(a.fact.property, a.fact.property_label)
        return cls(result.question.id, answers, result.trace.to_dict(), props)


def read_run(folder: str | Path) -> dict[str, Prediction]:
    """The predictions of a batch run folder (``kifqa run``/``kifqa.batch.run_job`` output): one per
    trace row; answers from ``answers/``. Only finished shards are read."""
    import pyarrow.parquet as pq

    root = Path(folder)
    traces_dir, answers_dir = root / "traces", root / "answers"
    if not traces_dir.is_dir():
        raise DataError(f"{root} is not a batch run folder (no traces/ folder)")
    shards = sorted(p for p in traces_dir.glob("shard-*.parquet"))
    answers: dict[str, dict[str, str]] = defaultdict(dict)
    props: dict[str, dict[str, str]] = defaultdict(dict)
    for shard in shards:
        path = answers_dir / shard.name
        if not path.is_file():
            continue
        table = pq.read_table(path, columns=["question_id", "answer", "answer_label", "property", "property_label"])
        for row in table.to_pylist():
            answers[row["question_id"]].setdefault(row["answer"], row["answer_label"] or "")
            if row["property"]:
                props[row["question_id"]].setdefault(row["property"], row["property_label"] or "")
    out: dict[str, Prediction] = {}
    for shard in shards:
        for row in pq.read_table(shard).to_pylist():
            qid = row["question_id"]
            out[qid] = Prediction(qid, answers.get(qid, {}), _trace_of(row), props.get(qid, {}))
    return out


def _trace_of(row: dict[str, Any]) -> dict[str, Any]:
    """The full trace of a traces/ row (its ``trace`` JSON), or what the columns say of it."""
    try:
        trace = json.loads(row.get("trace") or "{}")
    except ValueError:
        trace = {}
    if not isinstance(trace, dict):
        trace = {}
    for key in ("question_id", "question", "kb", "model", "error", "error_step", "n_answers", "kb_calls"):
        trace.setdefault(key, row.get(key))
    trace.setdefault("timings", {"total": row.get("seconds") or 0.0})
    return trace


def run_seconds(folder: str | Path) -> float:
    """The answering time a batch run folder's manifest records (0 when it records none)."""
    path = Path(folder) / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return 0.0
    summary = manifest.get("summary") or {}
    runs = manifest.get("runs") or []
    return float(summary.get("seconds") or sum(r.get("seconds") or 0.0 for r in runs) or 0.0)


# --- reading traces --------------------------------------------------------------------------------

def patterns(trace: dict[str, Any]) -> list[dict[str, str]]:
    return [p for p in trace.get("draft") or [] if isinstance(p, dict)]


def pattern_text(p: dict[str, str]) -> str:
    return f"({p.get('subject', '')} | {p.get('predicate', '')} | {p.get('object', '')})"


def known_label(p: dict[str, str]) -> str:
    """The known end of a drafted pattern (as :attr:`kifqa.types.Pattern.known`)."""
    return p.get("object", "") if p.get("subject") == UNKNOWN else p.get("subject", "")


def relations(trace: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The chosen (entity, property, direction) triples."""
    return [(r.get("entity", ""), r.get("property", ""), r.get("direction", ""))
            for r in trace.get("relations") or [] if isinstance(r, dict)]


def llm_steps(trace: dict[str, Any]) -> list[str]:
    return [c.get("step", "") for c in trace.get("llm_calls") or [] if isinstance(c, dict)]


def prompt_tokens(trace: dict[str, Any]) -> int:
    return sum(c.get("prompt_tokens") or 0 for c in trace.get("llm_calls") or [])


def uncached_prompt_tokens(trace: dict[str, Any]) -> int:
    return sum((c.get("prompt_tokens") or 0) - (c.get("cached_prompt_tokens") or 0)
               for c in trace.get("llm_calls") or [] if not c.get("cache_hit"))


def completion_tokens(trace: dict[str, Any]) -> int:
    return sum(c.get("completion_tokens") or 0 for c in trace.get("llm_calls") or [])


def seconds(trace: dict[str, Any]) -> float:
    return float((trace.get("timings") or {}).get("total") or 0.0)


def costs_per_question(traces: list[dict[str, Any]]) -> dict[str, float]:
    """LLM calls, prompt (all and uncached) and completion tokens, KB calls and seconds per question."""
    n = len(traces) or 1
    return {
        "llm_calls_per_question": sum(len(t.get("llm_calls") or []) for t in traces) / n,
        "prompt_tokens_per_question": sum(prompt_tokens(t) for t in traces) / n,
        "uncached_prompt_tokens_per_question": sum(uncached_prompt_tokens(t) for t in traces) / n,
        "completion_tokens_per_question": sum(completion_tokens(t) for t in traces) / n,
        "kb_calls_per_question": sum(t.get("kb_calls") or 0 for t in traces) / n,
        "seconds_per_question": sum(seconds(t) for t in traces) / n,
    }
