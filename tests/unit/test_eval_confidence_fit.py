"""The fitted silver confidence: features read from traces, a real scikit-learn fit on scored folders (written
by the real scoring path), the fitted model applied to silver rows and evaluations, and ``kifqa eval
--fit-confidence``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kifqa.cli.eval import eval_
from kifqa.errors import DataError
from kifqa.eval import confidence_fit
from kifqa.eval.confidence_fit import (
    ConfidenceModel,
    checked_threshold,
    fit,
    held_out_check,
    rater,
    read_scored,
    render_check,
)
from kifqa.eval.datasets import GoldQuestion
from kifqa.eval.evaluation import About, evaluate_predictions
from kifqa.eval.features import FEATURE_NAMES, features
from kifqa.eval.silver import PRODUCT, build_silver
from kifqa.runs import Prediction
from kifqa.types import Trace


def trace(*, choice_logprob: float | None = -0.1, draft_logprobs: tuple[float, float] | None = (-0.2, -0.9),
          options: int = 3, decisions: list[dict[str, Any]] = (), namesakes: int = 0,
          constraint: str | None = None, truncated: bool = False, error: str | None = None) -> Trace:
    """A question answered over Q1 P19 forward; the model chose the relation unless ``choice_logprob`` is
    ``None`` (then a rule did, or the only option)."""
    mean, least = draft_logprobs if draft_logprobs is not None else (None, None)
    calls = [{"step": "draft", "output": "(james brown | place of birth | ?x)", "completion_tokens": 9,
              "logprob": None if mean is None else mean * 9, "mean_logprob": mean, "min_logprob": least}]
    if choice_logprob is not None:
        calls.append({"step": "relations", "output": "2", "logprob": choice_logprob, "mean_logprob": choice_logprob,
                      "min_logprob": choice_logprob})
    candidates = [{"id": f"Q{i + 1}", "label": "James Brown", "score": 4.0} for i in range(1 + namesakes)]
    candidates.append({"id": "Q77", "label": "James Browne", "score": 2.0})
    return Trace.from_dict({
        "question_id": "q", "question": "where was james brown born", "kb": "local", "model": "m",
        "draft": [{"subject": "james brown", "predicate": "place of birth", "object": "?x"}]
        + ([{"subject": "?x", "predicate": "instance of", "object": "city"}] if constraint else []),
        "candidates": candidates, "entities": ["Q1"],
        "options": [{"entity": "Q1", "property": f"P{19 + i}", "direction": "forward"} for i in range(options)],
        "relations": [{"entity": "Q1", "property": "P19", "direction": "forward"}],
        "filters": [{"relation": {"entity": "Q1", "property": "P19", "direction": "forward"}, "filter": "F",
                     "sparql": "S", "n_statements": 1, "seconds": 0.1, "truncated": truncated}],
        "constraints": [{"constraint": {"subject": "?x", "predicate": "instance of", "object": "city"},
                         "result": constraint, "kept": 1, "of": 2}] if constraint else [],
        "decisions": list(decisions), "llm_calls": calls, "error": error,
    })


def test_the_features_of_a_relation_the_model_chose() -> None:
    x = features(trace(choice_logprob=-1.5, namesakes=2, constraint="unmet", truncated=True), 3)
    assert (x.by_model, x.by_rule, x.only_option, x.model_first) == (1.0, 0.0, 0.0, 0.0)
    assert (x.choice_logprob, x.draft_mean_logprob, x.draft_min_logprob, x.has_logprobs) == (-1.5, -0.2, -0.9, 1.0)
    assert x.namesakes == pytest.approx(math.log(3)) and x.n_answers == pytest.approx(math.log(4))
    assert (x.constraints_unmet, x.constraints_applied, x.truncated) == (1.0, 0.0, 1.0)
    assert (x.relation, x.constraints) == (0.5, 0.5)  # the hand-set factors stay features
    assert len(x.vector()) == len(FEATURE_NAMES)


def test_the_features_of_a_relation_a_rule_chose_carry_its_votes() -> None:
    obvious = {"rule": "obvious", "step": "relations", "taken": True,
               "inputs": {"options": 3, "chosen_votes": 0.8, "first_score": 2.0, "second_score": 1.0}}
    x = features(trace(choice_logprob=None, decisions=[obvious]), 1)
    assert (x.by_rule, x.by_model, x.votes, x.choice_logprob, x.has_logprobs) == (1.0, 0.0, 0.8, 0.0, 1.0)
    only = features(trace(choice_logprob=None, options=1), 1)
    assert (only.only_option, only.votes) == (1.0, 0.0)


def test_a_trace_without_logprobs_says_so() -> None:
    x = features(trace(draft_logprobs=None), 1)
    assert (x.has_logprobs, x.draft_mean_logprob, x.draft_min_logprob) == (0.0, 0.0, 0.0)


def scored_folder(path: Path, *, start: int = 0, n: int = 40, kb: str = "", wrong_every: int = 5) -> Path:
    """A scored evaluation folder, written by the real scoring path: every fifth question answered wrong, and
    there the model was unsure of its relation choice; every other way the questions look alike."""
    questions, predictions = [], {}
    for i in range(n):
        qid, wrong = f"sqwd-valid-{start + i}", i % wrong_every == 0
        t = trace(choice_logprob=(-2.0 if wrong else -0.05) - 0.1 * (i % 3))
        t.question_id = qid
        questions.append(GoldQuestion(id=qid, text=t.question, topic="Q1", property="P19", answer="Q100"))
        predictions[qid] = Prediction(question_id=qid, answers={"Q999" if wrong else "Q100": "x"}, trace=t)
    evaluation = evaluate_predictions(questions, predictions, None)
    dataclasses.replace(evaluation, about=About(kb=kb)).write(path)
    return path


def test_the_fit_separates_what_the_product_cannot(tmp_path: Path) -> None:
    fit_on, check = scored_folder(tmp_path / "fit"), scored_folder(tmp_path / "check", start=100, n=20)
    model = fit([fit_on])
    assert model.about["questions"] == 40 and model.about["right"] == 32
    assert model.about["sources"][0]["first"] == "sqwd-valid-0" and model.about["date"]
    answered = read_scored(check).answered
    right = [model.rate(s.trace, s.n_answers) for s in answered if s.precision == 1.0]
    wrong = [model.rate(s.trace, s.n_answers) for s in answered if s.precision < 1.0]
    assert min(right) > 0.5 > max(wrong)
    assert len({PRODUCT.rate(s.trace, s.n_answers) for s in answered}) == 1  # the product rates them all alike
    measured = held_out_check(model, [fit_on], [check])
    (base,) = measured["bases"].values()
    fitted = base["methods"]["fitted"]["targets"]["0.99"]["check"]
    assert (fitted["precision"], fitted["coverage"]) == (1.0, 0.8)
    assert base["methods"]["product"]["targets"]["0.99"] is None  # no threshold of it reaches 0.99
    assert base["methods"]["fitted"]["hindsight"]["0.99"]["coverage"] == 0.8

    model.write(tmp_path / "model.json")
    again = ConfidenceModel.read(tmp_path / "model.json")
    assert [again.rate(s.trace, s.n_answers) for s in answered] == [model.rate(s.trace, s.n_answers) for s in answered]
    assert model.rate(trace(error="boom"), 1) == 0.0 and model.rate(trace(), 0) == 0.0


def test_the_check_is_per_base_with_thresholds_from_the_same_base(tmp_path: Path) -> None:
    fit_local = scored_folder(tmp_path / "fit-local", kb="local", wrong_every=10)
    fit_hard = scored_folder(tmp_path / "fit-hard", start=200, kb="local-hard", wrong_every=3)
    check_local = scored_folder(tmp_path / "check-local", start=100, n=20, kb="local", wrong_every=10)
    check_hard = scored_folder(tmp_path / "check-hard", start=300, n=21, kb="local-hard", wrong_every=3)
    model = fit([fit_local, fit_hard])
    measured = held_out_check(model, [fit_local, fit_hard], [check_local, check_hard])
    assert list(measured["bases"]) == ["local", "local-hard"]
    local, hard = measured["bases"]["local"], measured["bases"]["local-hard"]
    assert (local["fit_questions"], local["check_questions"]) == (40, 20)
    assert (hard["fit_questions"], hard["check_questions"]) == (40, 21)
    kept_all = {m["at"][0]["threshold"]: m["at"][0] for m in hard["methods"].values()}
    assert kept_all[0.0]["coverage"] == 1.0 and kept_all[0.0]["precision"] == round(14 / 21, 4)
    shown = render_check(measured)
    assert "base local: thresholds from 40 fit questions, measured on 20" in shown
    assert "base local-hard: thresholds from 40 fit questions, measured on 21" in shown


def test_the_checked_threshold_is_the_bases_and_refused_where_it_was_not_checked(tmp_path: Path) -> None:
    fit_local = scored_folder(tmp_path / "fit", kb="local")
    model = fit([fit_local])
    model = dataclasses.replace(model, about={**model.about, "held_out_check": held_out_check(
        model, [fit_local], [scored_folder(tmp_path / "check", start=100, n=20, kb="local")])})
    chosen = checked_threshold(model, "local", 0.99)
    assert (chosen["precision"], chosen["coverage"], chosen["n"]) == (1.0, 0.8, 16)
    assert "measured on 20 held-out questions over local" in chosen["source"]
    with pytest.raises(DataError, match="not checked at precision 0.99 over the base 'wikidata'.*--calibration"):
        checked_threshold(model, "wikidata", 0.99)
    with pytest.raises(DataError, match="checked: none"):
        checked_threshold(fit([fit_local]), "local", 0.99)


def test_a_feature_constant_but_for_rounding_gets_no_weight(tmp_path: Path) -> None:
    folder = scored_folder(tmp_path / "fit")
    rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):  # the same draft probability, written with rounding noise in its last digit
        row["trace"]["llm_calls"][0]["mean_logprob"] = -0.3 + (1e-17 if i % 2 else 0.0)
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = fit([folder])
    assert model.weights["draft_mean_logprob"] == 0.0 and model.weights["relation"] == 0.0
    assert all(abs(w) < 100 for w in model.weights.values())


def test_a_fit_refuses_the_held_out_questions(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="held out.*sqwd-valid-700"):
        fit([scored_folder(tmp_path / "late", start=690)])


def test_a_fit_needs_right_and_wrong_answers(tmp_path: Path) -> None:
    folder = scored_folder(tmp_path / "f", n=40)
    rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines()]
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["precision"] == 1.0))
    with pytest.raises(DataError, match="all right"):
        fit([folder])


@pytest.mark.parametrize("text", ['{"kind": "logistic", "weights": {"shoe_size": 1}, "intercept": 0}',
                                  '{"kind": "isotonic"}', '{"kind": "logistic", "weights": {}, "intercept": "x"}',
                                  "not json"])
def test_a_bad_model_file_is_a_clear_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "m.json").write_text(text)
    with pytest.raises(DataError, match="cannot read the confidence model"):
        ConfidenceModel.read(tmp_path / "m.json")


def test_silver_rows_take_the_fitted_confidence(tmp_path: Path) -> None:
    model = fit([scored_folder(tmp_path / "fit")])
    sure, unsure = trace(choice_logprob=-0.05), trace(choice_logprob=-2.0)
    predictions = [Prediction(question_id=f"q{i}", answers={"Q100": "x"}, trace=t)
                   for i, t in enumerate((sure, unsure))]
    rows, summary = asyncio.run(build_silver(predictions, None, rater=rater(model)))
    assert rows[0]["confidence"] > 0.5 > rows[1]["confidence"]
    assert rows[0]["confidence_relation"] == rows[1]["confidence_relation"] == 0.5  # the factors stay beside it
    assert summary.confidence.startswith("fitted logistic regression (40 questions)")
    assert "fitted logistic regression" in summary.render()
    _, product = asyncio.run(build_silver(predictions, None))
    assert product.confidence == PRODUCT.method


def test_an_evaluation_draws_the_fitted_curve_beside_the_product_s(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    model = fit([scored_folder(tmp_path / "fit")])
    monkeypatch.setattr(confidence_fit, "default_model", lambda: None)  # as where kifqa ships no model
    before = json.loads((scored_folder(tmp_path / "a", n=10) / "metrics.json").read_text())["calibration"]
    assert before["method"] == PRODUCT.method and "product_curve" not in before
    monkeypatch.setattr(confidence_fit, "default_model", lambda: model)
    after = json.loads((scored_folder(tmp_path / "b", n=10) / "metrics.json").read_text())["calibration"]
    assert after["method"] == model.name
    assert [p["precision"] for p in after["curve"]][0] == 1.0 and len(after["product_curve"]) == 1


def test_kifqa_eval_fits_the_confidence_and_checks_it_on_other_folders(tmp_path: Path) -> None:
    fit_on, check = scored_folder(tmp_path / "fit"), scored_folder(tmp_path / "check", start=100, n=20)
    out = tmp_path / "model.json"
    result = CliRunner().invoke(eval_, ["--fit-confidence", str(out), str(fit_on), "--check", str(check)])
    assert result.exit_code == 0, result.output
    assert "| fitted | " in result.output and "| product | " in result.output
    written = json.loads(out.read_text())
    assert set(written["weights"]) == set(FEATURE_NAMES)
    assert written["about"]["held_out_check"]["check_questions"] == 20
    refused = CliRunner().invoke(eval_, ["--fit-confidence", str(out)])
    assert refused.exit_code == 2 and "SCORED" in refused.output
