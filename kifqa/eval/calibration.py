"""Calibration of the silver confidence on gold data: answer precision against coverage by threshold.

For each confidence threshold t, the questions answered with confidence >= t are kept: *coverage* is
their share of the questions with gold answers, *precision* their mean answer precision (the macro
precision of :mod:`kifqa.eval.metrics`). :func:`threshold_for` gives the lowest threshold (the most
coverage) whose precision reaches a target. :func:`calibrate` also checks the thresholds on questions
not used to fit them: fitted on the even positions of the evaluation, measured on the odd ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kifqa.errors import DataError

#: Precision targets whose thresholds every evaluation states.
TARGETS = (0.95, 0.99)


def curve(points: Sequence[tuple[float, float]], total: int) -> list[dict[str, float]]:
    """Precision and coverage at each distinct confidence of ``points`` ((confidence, precision) per
    answered question), highest threshold first; ``total`` counts all questions with gold answers."""
    out: list[dict[str, float]] = []
    kept, hits = 0, 0.0
    ordered = sorted(points, key=lambda p: -p[0])
    for i, (conf, precision) in enumerate(ordered):
        kept += 1
        hits += precision
        if i + 1 < len(ordered) and ordered[i + 1][0] == conf:
            continue
        out.append({"threshold": round(conf, 4), "n": kept, "coverage": round(kept / total, 4) if total else 0.0,
                    "precision": round(hits / kept, 4)})
    return out


def threshold_for(points: Sequence[dict[str, float]], target: float) -> dict[str, float] | None:
    """The curve point with the lowest threshold whose precision is at least ``target`` (``None`` if
    no threshold reaches it)."""
    reached = [p for p in points if p["precision"] >= target]
    return min(reached, key=lambda p: p["threshold"]) if reached else None


def measured_at(points: Sequence[tuple[float, float]], total: int, threshold: float) -> dict[str, float | None]:
    """Precision and coverage of ``points`` kept at ``threshold``."""
    kept = [precision for conf, precision in points if conf >= threshold]
    return {"threshold": threshold, "n": len(kept), "coverage": round(len(kept) / total, 4) if total else 0.0,
            "precision": round(sum(kept) / len(kept), 4) if kept else None}


def calibrate(questions: Sequence[tuple[float, float] | None]) -> dict[str, Any]:
    """The calibration of a gold evaluation: one entry per question with gold answers, in evaluation
    order: (confidence, answer precision) when it was answered, ``None`` when it was not."""
    answered = [q for q in questions if q is not None]
    total = len(questions)
    full = curve(answered, total)
    fit = [q for q in questions[0::2]]
    check = [q for q in questions[1::2]]
    fit_points = [q for q in fit if q is not None]
    check_points = [q for q in check if q is not None]
    fit_curve = curve(fit_points, len(fit))
    held_out: dict[str, Any] = {"fit": "even positions", "check": "odd positions",
                                "fit_questions": len(fit), "check_questions": len(check),
                                "check_curve": curve(check_points, len(check))}
    for target in TARGETS:
        point = threshold_for(fit_curve, target)
        held_out[str(target)] = None if point is None else {
            "fit": point, "check": measured_at(check_points, len(check), point["threshold"])}
    return {"questions": total, "answered": len(answered), "precision": "mean answer precision of the kept questions",
            "curve": full, "thresholds": {str(t): threshold_for(full, t) for t in TARGETS}, "held_out": held_out}


def run_threshold(folder: str | Path, target: float) -> dict[str, Any]:
    """The threshold a scored calibration folder (``metrics.json`` of ``kifqa eval`` on gold data)
    measured for ``target`` precision, with the precision, coverage and questions it measured there."""
    path = Path(folder) / "metrics.json"
    try:
        cal = json.loads(path.read_text()).get("calibration") or {}
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read the calibration run's {path} ({err}); score it with kifqa eval first") from err
    if not cal.get("curve"):
        raise DataError(f"{path} holds no calibration curve (no answered question with gold answers?)")
    point = threshold_for(cal["curve"], target)
    if point is None:
        best = max(p["precision"] for p in cal["curve"])
        raise DataError(f"no confidence threshold reaches precision {target} in {path} (the best is {best})")
    return {"run": str(Path(folder).absolute()), "target_precision": target, "questions": cal.get("questions"),
            **point}
