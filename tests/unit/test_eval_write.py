"""``kifqa eval``'s files are written as a run folder's are: whole (a unique temporary name, fsynced,
renamed into place) and private (mode 0600: they hold the questions and answers)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kifqa.eval.datasets import GoldQuestion
from kifqa.eval.evaluation import evaluate_predictions
from kifqa.report.sources import write_eval_report
from kifqa.runs import Prediction
from kifqa.types import Trace

QUESTIONS = [GoldQuestion(id=f"q{i}", text=f"question {i}", topic="", property="", answer="", answers=(f"Q{i}",))
             for i in range(3)]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_metrics_questions_and_the_page_are_private_whole_and_leave_no_temporary_file(tmp_path: Path) -> None:
    preds = {q.id: Prediction(question_id=q.id, answers={f"Q{i}": "x"}, trace=Trace(q.id, q.text))
             for i, q in enumerate(QUESTIONS)}
    evaluation = evaluate_predictions(QUESTIONS, preds, None)
    out = tmp_path / "eval"
    out.mkdir()
    for name in ("metrics.json", "questions.jsonl"):  # an older world-readable copy is replaced
        (out / name).write_text("old")
        (out / name).chmod(0o644)
    (out / "report.html.tmp").mkdir()  # a name another writer holds: each write takes its own
    old = os.umask(0o022)
    try:
        metrics, rows = evaluation.write(out)
        write_eval_report(out / "report.html", metrics=metrics, rows=rows)
    finally:
        os.umask(old)
    for name in ("metrics.json", "questions.jsonl", "report.html"):
        assert _mode(out / name) == 0o600, name
    assert (out / "metrics.json").read_text().startswith("{")
    assert len((out / "questions.jsonl").read_text().splitlines()) == 3
    assert "<html" in (out / "report.html").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "questions.jsonl", "report.html",
                                                     "report.html.tmp"]
