"""One question's prediction scored against its gold: scores, failure class, linking, confidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kifqa.eval.confidence_fit import default_rater
from kifqa.eval.datasets import GoldExtender, GoldQuestion
from kifqa.eval.failures import failure_of, linking
from kifqa.eval.metrics import Score, score
from kifqa.runs.results import Prediction
from kifqa.types import Result, Trace


def confidence_of(s: Scored) -> float:
    """The silver confidence of a scored question's answers: the shipped fitted model's where kifqa ships one,
    else the hand-set product (:func:`kifqa.eval.confidence_fit.default_rater`)."""
    return default_rater().rate(s.trace, len(s.predicted))


@dataclass(kw_only=True)
class Scored:
    """One question's result against its gold.

    ``result`` is the in-process :class:`Result` (``None`` when scored from a batch run folder);
    ``prediction`` holds what every source has: answers, their labels, the trace.
    """

    gold: GoldQuestion
    result: Result | None
    expected: set[str]
    score: Score
    failure: str | None
    prediction: Prediction | None = None
    detail: str | None = None
    linking: dict[str, bool | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.prediction is None:
            if self.result is None:
                raise ValueError("Scored needs a result or a prediction")
            self.prediction = Prediction.from_result(self.result)

    @property
    def trace(self) -> Trace:
        return self.prediction.trace  # type: ignore[union-attr]

    @property
    def predicted(self) -> set[str]:
        return self.prediction.answer_set  # type: ignore[union-attr]

    @property
    def has_gold(self) -> bool:
        """True when the question has gold answers (only those get precision, recall and F1)."""
        return bool(self.expected)

    def row(self) -> dict[str, Any]:
        t = self.trace
        answers = self.prediction.answers  # type: ignore[union-attr]
        return {
            "id": self.gold.id, "question": self.gold.text, "topic": self.gold.topic,
            "property": self.gold.property, "gold": sorted(self.expected),
            "predicted": sorted(answers), "labels": {a: answers[a] for a in sorted(answers)},
            "precision": self.score.precision, "recall": self.score.recall, "f1": self.score.f1,
            "scored": self.has_gold,
            "failure": self.failure, "failure_detail": self.detail, "linking": self.linking,
            "error": t.error, "error_step": t.error_step,
            "error_kind": None if t.error_kind is None else t.error_kind.value,
            "llm_calls": len(t.llm_calls), "prompt_tokens": t.prompt_tokens,
            "uncached_prompt_tokens": t.uncached_prompt_tokens, "seconds": t.seconds,
            "confidence": confidence_of(self),
            "trace": t.to_dict(),
        }


def score_prediction(gold: GoldQuestion, prediction: Prediction, extender: GoldExtender | None, *,
                     result: Result | None = None) -> Scored:
    """Scores one question's prediction (gold extended as in the paper)."""
    expected = extender.gold(gold) if extender is not None else set(gold.gold_answers)
    predicted = prediction.answer_set
    s = score(predicted, expected)
    names = extender.names(gold.topic) if extender is not None and gold.topic else None
    failure, detail = failure_of(gold, prediction.trace, predicted, s, has_gold=bool(expected), names=names)
    return Scored(gold=gold, result=result, expected=expected, score=s, failure=failure, prediction=prediction,
                  detail=detail, linking=linking(gold, prediction.trace))
