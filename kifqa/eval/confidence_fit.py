"""A fitted silver confidence: logistic regression over a question's :class:`~kifqa.eval.features.Features`.

:func:`fit` learns, from scored evaluation folders (``kifqa eval --out``: each question's trace and answer
precision in ``questions.jsonl``), the probability that an answered question's answers are all right (answer
precision 1). The model is written as JSON (:meth:`ConfidenceModel.write`): the weights by feature name, with the
description of its fit data (questions, datasets, bases, models, date), and applied without scikit-learn
(:meth:`ConfidenceModel.rate`). ``kifqa eval --fit-confidence`` fits one; :func:`default_model` is the one shipped
with kifqa, if any, which ``kifqa eval`` and ``kifqa silver`` use in place of the hand-set product of
:func:`kifqa.eval.silver.confidence`.

SimpleQuestions-Wikidata's valid questions 700 and above are held out for measuring the confidence: a fit refuses
them (:data:`HELD_OUT_FROM`).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from kifqa.errors import DataError
from kifqa.eval.calibration import TARGETS, curve, measured_at, threshold_for
from kifqa.eval.features import FEATURE_NAMES, Features, features
from kifqa.eval.silver import PRODUCT, Rater
from kifqa.types import Trace

#: The first SimpleQuestions-Wikidata valid question held out from fitting (``sqwd-valid-700`` on).
HELD_OUT_FROM = 700
_VALID_ID = re.compile(r"^sqwd-valid-(\d+)$")
#: The shipped model's file in this package (absent: none is shipped).
SHIPPED = "confidence-model.json"
#: L2 regularization strength of the fit (scikit-learn's ``C``: smaller is stronger).
REGULARIZATION_C = 1.0


@dataclass(frozen=True)
class ConfidenceModel:
    """Logistic-regression weights over named features (on their raw scale) and what they were fitted on."""

    weights: Mapping[str, float]
    intercept: float
    #: The fit data: questions, positives, folders, datasets, bases, models, date.
    about: Mapping[str, Any] = field(default_factory=dict)

    def rate(self, trace: Trace, n_answers: int) -> float:
        """The probability that a question's ``n_answers`` answers are right (0 with an error or no answer)."""
        if trace.error or n_answers <= 0:
            return 0.0
        return self.rate_features(features(trace, n_answers))

    def rate_features(self, x: Features) -> float:
        """The probability for the evidence ``x``."""
        z = self.intercept + sum(w * getattr(x, name) for name, w in self.weights.items())
        return round(1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z)))), 4)

    @property
    def name(self) -> str:
        """How rows rated by it say so (``fitted on N questions``)."""
        return f"fitted logistic regression ({self.about.get('questions', '?')} questions)"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "logistic", "weights": dict(self.weights), "intercept": self.intercept,
                "about": dict(self.about)}

    def write(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")

    @classmethod
    def read(cls, path: Path | str) -> ConfidenceModel:
        """The model a :meth:`write` wrote; :class:`DataError` saying what is wrong otherwise."""
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as err:
            raise DataError(f"cannot read the confidence model {path}: {err}; fit one with "
                            "kifqa eval --fit-confidence") from err

    @classmethod
    def from_dict(cls, data: Any) -> ConfidenceModel:
        """The model of :meth:`to_dict` (``ValueError`` for anything else, or a feature kifqa does not know)."""
        if not isinstance(data, Mapping) or data.get("kind") != "logistic":
            raise ValueError("not a logistic confidence model (kind must be 'logistic')")
        weights, intercept = data.get("weights"), data.get("intercept")
        if not isinstance(weights, Mapping) or not isinstance(intercept, (int, float)):
            raise ValueError("a confidence model needs weights (an object) and an intercept (a number)")
        if unknown := sorted(set(weights) - set(FEATURE_NAMES)):
            raise ValueError(f"unknown features {unknown} (known: {', '.join(FEATURE_NAMES)})")
        if not all(isinstance(w, (int, float)) and math.isfinite(w) for w in weights.values()):
            raise ValueError("every weight must be a finite number")
        return cls({k: float(v) for k, v in weights.items()}, float(intercept), dict(data.get("about") or {}))


@dataclass(frozen=True)
class Labelled:
    """One answered question of a scored folder: its evidence and answer precision."""

    id: str
    x: Features
    precision: float
    trace: Trace
    n_answers: int


@dataclass(frozen=True)
class Scored:
    """A scored evaluation folder: its answered questions with gold, how many questions have gold (answered or
    not: the coverage's whole), and what ``metrics.json`` says was answered with what."""

    folder: Path
    answered: tuple[Labelled, ...]
    questions: int
    about: Mapping[str, Any]

    def points(self, rate: Rater) -> list[tuple[float, float]]:
        """(confidence by ``rate``, answer precision) of each answered question."""
        return [(rate.rate(s.trace, s.n_answers), s.precision) for s in self.answered]


def read_scored(folder: Path) -> Scored:
    """The questions of a scored evaluation folder (``kifqa eval --out``)."""
    folder = Path(folder)
    try:
        metrics = json.loads((folder / "metrics.json").read_text())
        lines = (folder / "questions.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError) as err:
        raise DataError(f"{folder} is not a scored evaluation folder (metrics.json, questions.jsonl): {err}; "
                        "score it with kifqa eval --out") from err
    answered, questions = [], 0
    for row in rows:
        if not row.get("scored"):
            continue
        questions += 1
        if not row.get("predicted") or "trace" not in row:
            continue
        trace = Trace.from_dict(row["trace"])
        if trace.error:
            continue
        n = len(row["predicted"])
        answered.append(Labelled(str(row.get("id", "")), features(trace, n), float(row.get("precision") or 0.0),
                                 trace, n))
    about = {k: metrics.get(k) for k in ("dataset", "kb", "model", "examples") if metrics.get(k)}
    return Scored(folder, tuple(answered), questions, about)


def held_out(ids: Sequence[str]) -> list[str]:
    """The ids among ``ids`` that are held out from fitting (SimpleQuestions-Wikidata valid 700 and above)."""
    return [i for i in ids if (m := _VALID_ID.match(i)) and int(m.group(1)) >= HELD_OUT_FROM]


def fit(folders: Sequence[Path]) -> ConfidenceModel:
    """A logistic regression of "all answers right" on the features of the answered questions of ``folders``.

    The features are standardized for the fit and the weights mapped back to their raw scale. Raises
    :class:`DataError` when a folder holds held-out questions or the questions are all right (or all wrong).
    """
    from sklearn.linear_model import LogisticRegression

    samples: list[Labelled] = []
    sources = []
    for folder in folders:
        scored = read_scored(folder)
        found = scored.answered
        if bad := held_out([s.id for s in found]):
            raise DataError(f"{folder} holds questions held out for measuring the confidence ({bad[0]} and "
                            f"{len(bad) - 1} more): fit on sqwd:train and sqwd:valid below {HELD_OUT_FROM}")
        samples += found
        ids = sorted((s.id for s in found), key=lambda i: (len(i), i))  # sqwd-valid-99 before -100
        sources.append({"folder": str(folder), "questions": len(found),
                        "first": ids[0] if ids else None, "last": ids[-1] if ids else None, **scored.about})
    y = [s.precision >= 1.0 for s in samples]
    if len(set(y)) < 2:
        raise DataError(f"the {len(samples)} answered questions of {', '.join(map(str, folders))} are all "
                        f"{'right' if all(y) else 'wrong'}: a fit needs both; score more questions")
    rows = [s.x.vector() for s in samples]
    means = [sum(c) / len(c) for c in zip(*rows, strict=True)]
    spreads = [math.sqrt(sum((v - m) ** 2 for v in c) / len(c)) for c, m in zip(zip(*rows, strict=True), means,
                                                                                strict=True)]
    # A feature constant over the fit data (up to rounding) says nothing: it is left out (weight 0), never scaled
    # by a spread of rounding noise.
    scales = [s if s > 1e-9 * max(1.0, abs(m)) else math.inf for s, m in zip(spreads, means, strict=True)]
    scaled = [[(v - m) / s for v, m, s in zip(r, means, scales, strict=True)] for r in rows]
    regression = LogisticRegression(C=REGULARIZATION_C, max_iter=5000).fit(scaled, y)
    coef = [float(c) / s for c, s in zip(regression.coef_[0], scales, strict=True)]
    intercept = float(regression.intercept_[0]) - sum(c * m for c, m in zip(coef, means, strict=True))
    about = {"questions": len(samples), "right": sum(y), "label": "answer precision 1 (all answers right)",
             "method": f"scikit-learn LogisticRegression (L2, C={REGULARIZATION_C}) on standardized features",
             "date": datetime.now(UTC).date().isoformat(), "sources": sources}
    return ConfidenceModel(dict(zip(FEATURE_NAMES, (round(c, 6) for c in coef), strict=True)),
                           round(intercept, 6), about)


@functools.cache
def default_model() -> ConfidenceModel | None:
    """The model shipped with kifqa (:data:`SHIPPED`), or ``None`` when none is."""
    shipped = resources.files("kifqa.eval").joinpath(SHIPPED)
    if not shipped.is_file():
        return None
    return ConfidenceModel.from_dict(json.loads(shipped.read_text()))


def checked_threshold(model: ConfidenceModel, kb: str, target: float) -> dict[str, Any]:
    """The threshold ``model``'s held-out check (:func:`held_out_check`, kept in its description) chose for
    ``target`` precision over base ``kb`` on its fit data, with the precision and coverage it measured on the
    held-out questions: what ``kifqa silver --target-precision`` keeps rows by without a calibration run."""
    base = (model.about.get("held_out_check") or {}).get("bases", {}).get(kb)
    entry = base["methods"]["fitted"]["targets"].get(str(target)) if base else None
    if not entry:
        checked = sorted((model.about.get("held_out_check") or {}).get("bases", {}))
        raise DataError(f"the confidence model ({model.name}) was not checked at precision {target} over the base "
                        f"{kb!r} (checked: {', '.join(checked) or 'none'}, at {', '.join(map(str, TARGETS))}): "
                        "give --calibration DIR, a kifqa eval folder on gold data of this base")
    return {"target_precision": target, "threshold": entry["threshold"], "precision": entry["check"]["precision"],
            "coverage": entry["check"]["coverage"], "n": entry["check"]["n"], "questions": base["check_questions"],
            "source": f"{model.name}: its threshold chosen on the fit data, measured on {base['check_questions']} "
                      f"held-out questions over {kb}"}


def rater(model: ConfidenceModel | None) -> Rater:
    """The :class:`~kifqa.eval.silver.Rater` of ``model``; the hand-set product without one."""
    return PRODUCT if model is None else Rater(model.rate, model.name)


def default_rater() -> Rater:
    """The shipped model's rater (:func:`default_model`), else the hand-set product's."""
    return rater(default_model())


#: Fixed thresholds whose precision and coverage :func:`held_out_check` reports on the check folders (0: every
#: answered question kept).
CHECK_THRESHOLDS = (0.0, 0.5, 0.75, 0.9)


def held_out_check(model: ConfidenceModel, fit_on: Sequence[Path], check: Sequence[Path]) -> dict[str, Any]:
    """The fitted confidence against the hand-set product on questions the fit did not see, per base (a scored
    folder's ``kb``): for each confidence, the threshold that reached each target precision
    (:data:`~kifqa.eval.calibration.TARGETS`) on the fit folders of that base (on all of them where none is of
    it), measured on the base's ``check`` folders; precision and coverage there at :data:`CHECK_THRESHOLDS`; the
    most coverage any threshold gives at each target on the check folders themselves (chosen in hindsight: what
    the confidence could reach, not a measure); and the check folders' risk–coverage curve."""
    fitted, checked = [read_scored(f) for f in fit_on], [read_scored(f) for f in check]
    out: dict[str, Any] = {"fit_questions": sum(s.questions for s in fitted),
                           "check_questions": sum(s.questions for s in checked),
                           "check": [str(f) for f in check], "bases": {}}
    for base in dict.fromkeys(_base(s) for s in checked):
        out["bases"][base] = _compare(model, [s for s in fitted if _base(s) == base] or fitted,
                                      [s for s in checked if _base(s) == base])
    return out


def _base(scored: Scored) -> str:
    return str(scored.about.get("kb") or "?")


def _compare(model: ConfidenceModel, fitted: Sequence[Scored], checked: Sequence[Scored]) -> dict[str, Any]:
    """:func:`held_out_check`'s figures for one base's fit and check folders."""
    fit_total, check_total = sum(s.questions for s in fitted), sum(s.questions for s in checked)
    out: dict[str, Any] = {"fit_questions": fit_total, "check_questions": check_total, "methods": {}}
    for name, rate in (("product", PRODUCT), ("fitted", rater(model))):
        fit_points = [p for s in fitted for p in s.points(rate)]
        check_points = [p for s in checked for p in s.points(rate)]
        fit_curve, check_curve = curve(fit_points, fit_total), curve(check_points, check_total)
        targets = {}
        for target in TARGETS:
            point = threshold_for(fit_curve, target)
            targets[str(target)] = None if point is None else {
                "threshold": point["threshold"], "fit": point,
                "check": measured_at(check_points, check_total, point["threshold"])}
        out["methods"][name] = {
            "method": rate.method, "targets": targets,
            "at": [measured_at(check_points, check_total, t) for t in CHECK_THRESHOLDS],
            "hindsight": {str(t): threshold_for(check_curve, t) for t in TARGETS},
            "check_curve": check_curve}
    return out


def render_check(check: Mapping[str, Any]) -> str:
    """:func:`held_out_check` as text: per base, a table of confidence, threshold, precision and coverage on the
    check folders."""
    lines = [f"fitted on {check['fit_questions']} questions, checked on {check['check_questions']} others"]
    for base, measured in check["bases"].items():
        lines += ["", f"base {base}: thresholds from {measured['fit_questions']} fit questions, measured on "
                      f"{measured['check_questions']} held-out ones",
                  "| confidence | threshold (how chosen) | precision | coverage | kept |",
                  "| --- | --- | ---: | ---: | ---: |"]
        for name, m in measured["methods"].items():
            rows = [(f"{p['threshold']} (fixed)", p) for p in m["at"]]
            rows += [(f"{v['threshold']} (precision {target} on the fit data)", v["check"])
                     for target, v in m["targets"].items() if v is not None]
            rows += [(f"{v['threshold']} (precision {target} here, in hindsight)", v)
                     for target, v in m["hindsight"].items() if v is not None]
            for label, p in rows:
                precision = "-" if p["precision"] is None else f"{p['precision']:.3f}"
                lines.append(f"| {name} | {label} | {precision} | {p['coverage']:.3f} | {p['n']} |")
    return "\n".join(lines)
