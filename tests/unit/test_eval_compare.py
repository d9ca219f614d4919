"""``kifqa eval --compare``: metric deltas and the questions that got better or worse."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kifqa.cli import cli
from kifqa.eval.compare import compare, load_scored, render
from kifqa.eval.datasets import GoldQuestion
from kifqa.eval.evaluation import About, evaluate_predictions
from kifqa.runs import Prediction
from kifqa.types import Trace

QUESTIONS = [GoldQuestion(id=f"q{i}", text=f"question {i}", topic="", property="", answer="", answers=(f"Q{i}",)) for i in range(4)]


def scored_folder(path: Path, answers: dict[str, list[str]]) -> Path:
    preds = {qid: Prediction(question_id=qid, answers={a: a for a in ans}, trace=Trace(qid, "", timings={"total": 0.5}))
             for qid, ans in answers.items()}
    evaluation = evaluate_predictions(QUESTIONS, preds, None)
    evaluation.about = About(dataset="hand-made")
    evaluation.write(path)
    return path


def folders(tmp_path: Path) -> tuple[Path, Path]:
    a = scored_folder(tmp_path / "a", {"q0": ["Q0"], "q1": ["Q1"], "q2": [], "q3": ["Q9"]})
    b = scored_folder(tmp_path / "b", {"q0": ["Q0"], "q1": [], "q2": ["Q2"], "q3": ["Q3", "Q9"]})
    return a, b


def test_compare_finds_better_and_worse(tmp_path: Path) -> None:
    a, b = folders(tmp_path)
    c = compare(load_scored(a), load_scored(b), names=("a", "b"))
    assert c["questions"] == {"a": 4, "b": 4, "common": 4, "better": 2, "worse": 1, "same": 1}
    assert [r["id"] for r in c["better"]] == ["q2", "q3"]  # 0 → 1 before 0 → 0.67
    assert [r["id"] for r in c["worse"]] == ["q1"]
    f1 = next(m for m in c["metrics"] if m["metric"] == "macro F1")
    assert (f1["a"], f1["b"]) == (0.5, round((1 + 0 + 1 + 2 / 3) / 4, 4)) and f1["delta"] > 0
    assert c["transitions"] == {"empty → ok": 1, "ok → empty": 1}  # q3 stays partial
    text = render(c)
    assert "## Better in B (2)" in text and "## Worse in B (1)" in text and "| macro F1 | 0.500 |" in text


def test_compare_command(tmp_path: Path) -> None:
    a, b = folders(tmp_path)
    out = tmp_path / "cmp"
    result = CliRunner().invoke(cli, ["eval", "--compare", str(a), str(b), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Worse in B (1)" in result.output and "`q1`" in result.output
    saved = json.loads((out / "compare.json").read_text())
    assert saved["questions"]["better"] == 2 and (out / "compare.md").read_text() == result.output.rstrip("\n") + "\n"


def test_compare_refuses_unscored_folders(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    result = CliRunner().invoke(cli, ["eval", "--compare", str(tmp_path / "x"), str(tmp_path / "y")])
    assert result.exit_code != 0 and "batch run folder" in result.output


def test_questions_without_gold_answers_compare_by_their_linking() -> None:
    """Only a change of entity or relation linking makes such a question better or worse (a check added to
    the rows since, such as ``offered``, leaves it the same)."""
    def row(qid: str, entity: bool, relation: bool, **more: bool | None) -> dict:
        return {"id": qid, "scored": False, "f1": 0.0, "linking": {"entity": entity, "relation": relation, **more}}

    a = {"x": row("x", True, False), "y": row("y", True, True), "z": row("z", True, False)}
    b = {"x": row("x", True, True, offered=True), "y": row("y", True, False, offered=False),
         "z": row("z", True, False, offered=None)}
    c = compare(({}, a), ({}, b))
    assert [r["id"] for r in c["better"]] == ["x"] and [r["id"] for r in c["worse"]] == ["y"]
    assert c["questions"]["same"] == 1
