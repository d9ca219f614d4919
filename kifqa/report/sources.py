"""The report pages of a run folder, an evaluation, silver data and two runs side by side.

Each entry point gathers page rows (see :mod:`kifqa.report.data`) and a summary, then writes the page:

- :func:`write_folder_report`: any folder: a scored evaluation (``metrics.json`` and
  ``questions.jsonl``, written by ``kifqa eval``) or a batch run folder (``traces/``, ``answers/``;
  with ``silver.parquet`` beside it, each question's confidence);
- :func:`write_eval_report`: an evaluation's rows and metrics (``kifqa eval`` writes it);
- :func:`write_silver_report`: the predictions of ``kifqa silver`` with their confidences;
- :func:`write_compare_report`: the questions two folders answered differently.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kifqa.errors import DataError
from kifqa.eval import traces as tr
from kifqa.eval.evaluation import Evaluation
from kifqa.eval.report import write_report
from kifqa.eval.silver import PRODUCT, Rater
from kifqa.report.data import compare_table, prediction_row, question_table
from kifqa.report.page import write_page
from kifqa.runs.results import Prediction
from kifqa.runs.storage import is_uri, shown
from kifqa.types import Trace

#: The page a folder gets (beside ``report.md``).
PAGE = "report.html"


def _title(summary: Mapping[str, Any], kind: str) -> str:
    parts = [summary.get(k) for k in ("dataset", "model", "kb")]
    named = " · ".join(str(p) for p in parts if p)
    return f"kifqa {kind}" + (f": {named}" if named else "")


def run_figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The figures of questions without gold: counts, and costs per question."""
    traces = [Trace.from_dict(r.get("trace") or {}) for r in rows]
    return {"questions": len(rows), "answered": sum(bool(r.get("labels")) for r in rows),
            "errors": sum(bool(t.error) for t in traces), **tr.costs_per_question(traces)}


def write_rows(path: str | Path, *, rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any], kind: str,
               about: str) -> Path:
    """The page of ``rows`` (:mod:`kifqa.report.data`) under ``summary``; ``kind`` names the source."""
    columns, records = question_table(rows)
    return write_page(path, title=_title(summary, kind), about=about, summary=dict(summary), columns=columns,
                      records=records)


def write_evaluation(evaluation: Evaluation, out: str | Path, *, report: bool = True) -> None:
    """``evaluation``'s ``metrics.json`` and ``questions.jsonl`` in ``out``; with ``report``, also
    ``report.md`` with its plots and the HTML page :data:`PAGE`."""
    out = Path(out)
    metrics, rows = evaluation.write(out)
    if report:
        write_report(evaluation, out, metrics)
        write_eval_report(out / PAGE, metrics=metrics, rows=rows)


def write_eval_report(path: str | Path, *, metrics: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> Path:
    """The page of an evaluation: its metrics and its scored rows (:meth:`kifqa.eval.scoring.Scored.row`)."""
    rows = list(rows)
    about = f"{metrics.get('questions', len(rows))} questions, {metrics.get('answers_scored', 0)} with gold answers"
    if metrics.get("run"):
        about += f"; run {metrics['run']}"
    return write_rows(path, rows=rows, summary=metrics, kind="evaluation", about=about)


def write_silver_report(path: str | Path, *, predictions: Iterable[Prediction], summary: Mapping[str, Any],
                        about: str = "", rater: Rater | None = None) -> Path:
    """The page of ``kifqa silver``: every question, with the confidence of the answered ones (by ``rater``, the
    silver rows'; the hand-set product without one); the silver summary adds to the figures computed from the
    traces."""
    rate = rater or PRODUCT
    rows = [prediction_row(p, confidence=rate.rate(p.trace, len(p.answers)) if p.answers else None)
            for p in predictions]
    return write_rows(path, rows=rows, summary={**run_figures(rows), **summary}, kind="silver data",
                       about=about or f"{len(rows)} questions")


# --- folders -----------------------------------------------------------------------------------------

def _scored(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The metrics and rows (with traces) of a scored evaluation folder, or ``None``."""
    metrics, questions = folder / "metrics.json", folder / "questions.jsonl"
    if not (metrics.is_file() and questions.is_file()):
        return None
    try:
        with questions.open() as f:
            rows = [json.loads(line) for line in f if line.strip()]
        return json.loads(metrics.read_text()), rows
    except ValueError as err:
        raise DataError(f"{folder}: unreadable evaluation ({err})") from err


def _run_rows(folder: Path | str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The figures and rows of a batch run folder, local or at a URI (confidences from a local folder's
    ``silver.parquet`` when there): computed from the traces, with the model, KB and the job's summary
    from its manifest."""
    from kifqa.runs import RunFolder
    from kifqa.runs.results import read_run, run_about, run_seconds

    predictions = read_run(folder)
    confidences: dict[str, float] = {}
    if isinstance(folder, Path) and (folder / "silver.parquet").is_file():
        import pyarrow.parquet as pq

        table = pq.read_table(folder / "silver.parquet", columns=["id", "confidence"])
        confidences = dict(zip(table.column("id").to_pylist(), table.column("confidence").to_pylist()))
    rows = [prediction_row(p, confidence=confidences.get(qid)) for qid, p in predictions.items()]
    figures = {**run_figures(rows), **{k: v for k, v in run_about(folder).items() if v}}
    if seconds := run_seconds(folder):
        figures["wall_s"] = seconds
    if job := RunFolder(folder).manifest_or_empty().get("summary"):
        figures["job"] = job
    return figures, rows


def load_folder(folder: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """A folder's summary, page rows and kind (``evaluation`` or ``run``); a folder at a URI is a run."""
    if is_uri(folder):
        from kifqa.runs import RunFolder

        if not RunFolder(folder).exists():
            raise DataError(f"{shown(folder)} holds no run (traces/)")
        figures, rows = _run_rows(str(folder))
        return figures, rows, "run"
    folder = Path(folder)
    scored = _scored(folder)
    if scored is not None:
        return scored[0], scored[1], "evaluation"
    if (folder / "traces").is_dir():
        figures, rows = _run_rows(folder)
        return figures, rows, "run"
    raise DataError(f"{folder} holds no run (traces/) and no evaluation (metrics.json, questions.jsonl)")


def write_folder_report(folder: str | Path, out: str | Path | None = None) -> Path:
    """The page of a run or evaluation folder, written to ``out`` (default ``folder/report.html``; a page
    of a folder at a URI needs ``out``)."""
    if out is None and is_uri(folder):
        raise DataError(f"{shown(folder)} is not on this machine's disk: say where to write its page (--out)")
    summary, rows, kind = load_folder(folder)
    path = Path(out) if out is not None else Path(folder) / PAGE
    if kind == "evaluation":
        return write_eval_report(path, metrics=summary, rows=rows)
    about = f"{len(rows)} questions; run {shown(folder)}"
    return write_rows(path, rows=rows, summary=summary, kind=kind, about=about)


def write_compare_report(a: str | Path, b: str | Path, out: str | Path) -> Path:
    """The questions that folders ``a`` and ``b`` answered differently (answers, F1 or failure class),
    side by side, with the metric deltas (B − A) of :func:`kifqa.eval.compare.compare`."""
    from kifqa.eval.compare import compare

    (ma, ra, _), (mb, rb, _) = load_folder(a), load_folder(b)
    by_id_a, by_id_b = {r["id"]: r for r in ra}, {r["id"]: r for r in rb}
    result = compare((ma, by_id_a), (mb, by_id_b), names=(str(a), str(b)))
    columns, records = compare_table(by_id_a, by_id_b, better={r["id"] for r in result["better"]},
                                     worse={r["id"] for r in result["worse"]})
    summary = {k: result[k] for k in ("metrics", "questions", "transitions")}
    return write_page(out, title=f"kifqa: {a} vs {b}", about=f"A = {a}, B = {b}", summary=summary,
                      columns=columns, records=records, kind="compare", names=(str(a), str(b)))
