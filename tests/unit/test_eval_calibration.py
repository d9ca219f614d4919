"""Precision against coverage by confidence threshold, the thresholds for a target precision, and the
held-out check (fit on even positions, measure on odd ones)."""

from __future__ import annotations

import pytest

from kifqa.eval.calibration import calibrate, curve, measured_at, threshold_for


def test_curve_keeps_ties_together_and_counts_unanswered_in_coverage() -> None:
    points = [(0.9, 1.0), (0.9, 0.0), (0.5, 1.0), (0.2, 1.0)]
    got = curve(points, total=5)  # one more question was not answered
    assert got == [{"threshold": 0.9, "n": 2, "coverage": 0.4, "precision": 0.5},
                   {"threshold": 0.5, "n": 3, "coverage": 0.6, "precision": pytest.approx(0.6667, abs=1e-4)},
                   {"threshold": 0.2, "n": 4, "coverage": 0.8, "precision": 0.75}]


def test_threshold_for_a_target_takes_the_most_coverage_that_reaches_it() -> None:
    points = curve([(1.0, 1.0), (0.8, 1.0), (0.6, 0.0), (0.4, 1.0), (0.3, 1.0), (0.1, 0.0)], total=6)
    assert threshold_for(points, 0.99)["threshold"] == 0.8
    assert threshold_for(points, 0.75)["threshold"] == 0.3  # 4 of 5 kept are right: 0.8
    assert threshold_for(points, 1.01) is None
    assert measured_at([(0.9, 1.0), (0.2, 0.0)], 3, 0.5) == {"threshold": 0.5, "n": 1, "coverage": 0.3333,
                                                              "precision": 1.0}


def test_calibrate_checks_the_fitted_threshold_on_the_other_half() -> None:
    # even positions: confident answers are right; odd positions: the confident ones are wrong
    questions = [(0.9, 1.0), (0.9, 0.0), (0.4, 0.0), (0.4, 1.0), None, (0.8, 1.0)]
    cal = calibrate(questions)
    assert (cal["questions"], cal["answered"]) == (6, 5)
    held = cal["held_out"]
    assert (held["fit_questions"], held["check_questions"]) == (3, 3)
    assert held["0.95"]["fit"]["threshold"] == 0.9
    assert held["0.95"]["check"] == {"threshold": 0.9, "n": 1, "coverage": 0.3333, "precision": 0.0}
    assert cal["thresholds"]["0.95"] is None  # over all questions no threshold is that precise
