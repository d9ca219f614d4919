"""Reading a run back: what it said about each question (:class:`Prediction`), from in-process
:class:`~kifqa.types.Result` objects or a run folder, and what its manifest records (time, settings,
corpus). Everything downstream (scores, failure classes, reports, silver data) reads the same
:class:`Prediction`: the predicted answers with their labels, and the :class:`~kifqa.types.Trace`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kifqa.errors import ConfigError, DataError
from kifqa.runs.corpus import read_corpus
from kifqa.runs.folder import RunFolder
from kifqa.types import Result, Trace


@dataclass(kw_only=True)
class Prediction:
    """One question's predicted answers (id or value → label) and trace."""

    question_id: str
    answers: dict[str, str]
    trace: Trace
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
        return cls(question_id=result.question.id, answers=answers, trace=result.trace, property_labels=props)


def read_run(folder: str | Path) -> dict[str, Prediction]:
    """The predictions of a run folder (``kifqa run``/``kifqa.batch.run_job`` output): one per trace
    row; answers from ``answers/``. Only finished shards are read."""
    run = RunFolder(folder)
    if not run.exists():
        raise DataError(f"{run.uri} is not a batch run folder (no traces/ folder)")
    answers: dict[str, dict[str, str]] = defaultdict(dict)
    props: dict[str, dict[str, str]] = defaultdict(dict)
    for row in run.read_answers(["question_id", "answer", "answer_label", "property", "property_label"]).to_pylist():
        answers[row["question_id"]].setdefault(row["answer"], row["answer_label"] or "")
        if row["property"]:
            props[row["question_id"]].setdefault(row["property"], row["property_label"] or "")
    out: dict[str, Prediction] = {}
    for row in run.read_traces().to_pylist():
        qid = row["question_id"]
        out[qid] = Prediction(question_id=qid, answers=answers.get(qid, {}), trace=_trace_of(row),
                              property_labels=props.get(qid, {}))
    return out


def _trace_of(row: dict[str, Any]) -> Trace:
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
    return Trace.from_dict(trace)


def run_seconds(folder: str | Path) -> float:
    """The answering time a run folder's manifest records (0 when it records none)."""
    manifest = RunFolder(folder).manifest_or_empty()
    summary = manifest.get("summary") or {}
    runs = manifest.get("runs") or []
    return float(summary.get("seconds") or sum(r.get("seconds") or 0.0 for r in runs) or 0.0)


def run_config(folder: str | Path) -> dict[str, Any]:
    """The settings a run's manifest records (secrets masked; empty where it has none)."""
    config = RunFolder(folder).manifest_or_empty().get("config")
    return config if isinstance(config, dict) else {}


def run_about(folder: str | Path) -> dict[str, str]:
    """Model, KB and examples of a run, from its manifest's settings."""
    config = run_config(folder)
    examples = config.get("examples") or {}
    return {"model": (config.get("llm") or {}).get("model", ""), "kb": (config.get("kb") or {}).get("spec", ""),
            "examples": f"{examples.get('mode', '')} k={examples.get('k', '')}" if examples else ""}


def run_corpus_size(folder: str | Path) -> int | None:
    """How many questions the run's corpus has, as its manifest records (``None`` if it does not)."""
    n = (RunFolder(folder).manifest_or_empty().get("corpus") or {}).get("questions")
    return n if isinstance(n, int) else None


def run_corpus_ids(folder: str | Path) -> set[str] | None:
    """The question ids of a run's corpus, read as the job read it (the manifest's corpus file, id
    and question columns); ``None`` when the file is gone or changed since the run."""
    manifest = RunFolder(folder).manifest_or_empty()
    corpus = manifest.get("corpus") or {}
    batch = (manifest.get("config") or {}).get("batch") or {}
    if not corpus.get("path"):
        return None
    try:
        read = read_corpus(corpus["path"], id_column=batch.get("id_column") or "id",
                           question_column=batch.get("question_column") or "question")
    except (ConfigError, OSError, ValueError):
        return None
    if corpus.get("sha256") and read.sha256 != corpus["sha256"]:
        return None
    return {q.id for q in read.questions()}
