from __future__ import annotations

import pytest

from kifqa.eval.metrics import score, summarize


def test_empty_prediction_scores_zero() -> None:
    s = score([], ["Q1"])
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)


def test_empty_gold_has_zero_recall() -> None:
    assert score(["Q1"], []).recall == 0.0


def test_partial_overlap() -> None:
    s = score(["Q1", "Q2"], ["Q1", "Q3", "Q4"])
    assert s.precision == 0.5 and s.recall == pytest.approx(1 / 3) and s.f1 == pytest.approx(0.4)


def test_macro_vs_micro() -> None:
    scores = [score(["Q1"], ["Q1"]), score([f"Q{i}" for i in range(10)], ["Q0"] + [f"Z{i}" for i in range(9)])]
    summary = summarize(scores)
    assert summary.macro_precision == pytest.approx((1 + 0.1) / 2)
    assert summary.micro_precision == pytest.approx(2 / 11)
    assert summary.macro_f1 != pytest.approx(summary.micro_f1)
