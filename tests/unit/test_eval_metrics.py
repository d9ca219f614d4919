"""The KIF-QA paper's metrics on hand-made cases: empty prediction, empty gold, extended gold, macro
versus micro, the single-answer restriction."""

from __future__ import annotations

import pytest

from kifqa.eval.datasets import GoldExtender, GoldQuestion
from kifqa.eval.evaluation import evaluate_predictions
from kifqa.eval.metrics import score, summarize
from kifqa.runs import Prediction
from kifqa.types import Trace


def test_empty_prediction_scores_zero() -> None:
    s = score([], ["Q1"])
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)


def test_empty_gold_has_zero_recall() -> None:
    assert score(["Q1"], []).recall == 0.0


def test_partial_overlap() -> None:
    s = score(["Q1", "Q2"], ["Q1", "Q3", "Q4"])
    assert s.precision == 0.5 and s.recall == pytest.approx(1 / 3) and s.f1 == pytest.approx(0.4)


def test_duplicates_count_once() -> None:
    s = score(["Q1", "Q1", "Q2"], ["Q1"])
    assert (s.true_positives, s.predicted, s.gold) == (1, 2, 1)


def test_macro_vs_micro() -> None:
    scores = [score(["Q1"], ["Q1"]), score([f"Q{i}" for i in range(10)], ["Q0"] + [f"Z{i}" for i in range(9)])]
    summary = summarize(scores)
    assert summary.macro_precision == pytest.approx((1 + 0.1) / 2)
    assert summary.micro_precision == pytest.approx(2 / 11)
    assert summary.macro_recall == pytest.approx((1 + 0.1) / 2)
    assert summary.micro_recall == pytest.approx(2 / 11)
    assert summary.macro_f1 == pytest.approx((1 + 0.1) / 2)
    assert summary.micro_f1 == pytest.approx(2 / 11)


def test_macro_and_micro_differ_when_a_question_predicts_many() -> None:
    # One perfect question and one empty one: macro P = 0.5 (the empty one counts 0), micro P = 1
    # (an empty prediction adds nothing to the summed counts).
    summary = summarize([score(["Q1"], ["Q1"]), score([], ["Q2"])])
    assert summary.macro_precision == pytest.approx(0.5) and summary.micro_precision == pytest.approx(1.0)
    assert summary.macro_recall == pytest.approx(0.5) and summary.micro_recall == pytest.approx(0.5)


def test_summarize_nothing() -> None:
    assert summarize([]).n == 0 and summarize([]).macro_f1 == 0.0


def _q(qid: str, answers: tuple[str, ...]) -> GoldQuestion:
    return GoldQuestion(id=qid, text=f"question {qid}", topic="", property="", answer="", answers=answers)


def _p(qid: str, *answers: str) -> Prediction:
    return Prediction(question_id=qid, answers={a: a.lower() for a in answers}, trace=Trace(qid, ""))


def test_evaluation_leaves_questions_without_gold_out_of_the_answer_metrics() -> None:
    questions = [_q("a", ("Q1",)), _q("b", ())]
    ev = evaluate_predictions(questions, {"a": _p("a", "Q1"), "b": _p("b", "Q9")}, None)
    m = ev.metrics()
    assert m["questions"] == 2 and m["answers_scored"] == 1
    assert m["all"]["n"] == 1 and m["all"]["macro_f1"] == 1.0 and m["all"]["micro_precision"] == 1.0
    assert [s.has_gold for s in ev.scored] == [True, False]


def test_single_answer_restriction() -> None:
    questions = [_q("a", ("Q1",)), _q("b", ("Q2", "Q3")), _q("c", ("Q4",))]
    preds = {"a": _p("a", "Q1"), "b": _p("b", "Q2", "Q3"), "c": _p("c")}
    m = evaluate_predictions(questions, preds, None).metrics()
    assert m["all"]["n"] == 3 and m["single_answer"]["n"] == 2
    assert m["all"]["macro_f1"] == pytest.approx(2 / 3, abs=1e-4)  # metrics.json rounds to 4 places
    assert m["single_answer"]["macro_f1"] == pytest.approx(0.5)
    assert m["single_answer"]["micro_recall"] == pytest.approx(0.5)
    assert m["correct"] == 2
    assert m["failure_counts"]["empty"] == 1


@pytest.fixture
def extended(tiny_data, tiny_data_dir) -> GoldExtender:
    """Q3 is labelled 'Alpha', Q4 has the alias 'Alpha'; Q5 and Q6 have no label."""
    tiny_data["items"]["Q6"] = ["No label defined"]
    tiny_data["triples"] += [("Q3", "P10", "Q1"), ("Q4", "P10", "Q2"), ("Q6", "P10", "Q2")]
    return GoldExtender(tiny_data_dir(tiny_data))


def test_extended_gold_adds_the_answers_of_namesakes(extended: GoldExtender) -> None:
    q = GoldQuestion(id="x", text="where is alpha located", topic="Q3", property="P10", answer="Q1", dataset="sqwd:valid")
    assert extended.gold(q) == {"Q1", "Q2"}  # Q4 is also called 'Alpha' and is located in Q2
    s = score({"Q2"}, extended.gold(q))
    assert s.precision == 1.0 and s.recall == 0.5  # Q2 counts as right thanks to the extension


def test_extended_gold_of_an_inverse_question(extended: GoldExtender) -> None:
    q = GoldQuestion(id="y", text="what is located in alpha", topic="Q3", property="R10", answer="Q1", dataset="sqwd:valid")
    assert extended.gold(q) == {"Q1", "Q2"}  # the subjects of (?, P10, Q3); nothing is located in Q4


def test_items_without_a_label_are_not_namesakes(extended: GoldExtender) -> None:
    q = GoldQuestion(id="z", text="where is it", topic="Q5", property="P10", answer="Q1", dataset="sqwd:valid")
    assert extended.gold(q) == {"Q1"}  # Q6 shares the placeholder 'No label defined', not a name


def test_questions_without_a_sqwd_property_keep_their_gold(extended: GoldExtender) -> None:
    q = GoldQuestion(id="w", text="what", topic="Q3", property="", answer="", answers=("Q7", "Q8"))
    assert extended.gold(q) == {"Q7", "Q8"}


def test_a_gold_file_scores_without_the_base_statements(tmp_path) -> None:
    """Slices need the data folder's statements; without them a gold file is still scored (no slices)."""
    q = GoldQuestion(id="a", text="who?", topic="Q1", property="P19", answer="", answers=("Q2",), dataset="gold.jsonl")
    ev = evaluate_predictions([q], {"a": Prediction(question_id="a", answers={"Q2": "x"}, trace=Trace("a", ""))},
                              GoldExtender(tmp_path))
    m = ev.metrics()
    assert m["slices"] == {} and m["all"]["macro_f1"] == 1.0 and m["calibration"]["questions"] == 1
