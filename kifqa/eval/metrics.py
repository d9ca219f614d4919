"""The KIF-QA paper's metrics: per-question precision, recall and F1 over answer entities,
macro (mean over questions) and micro (summed counts) averages."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Score:
    """One question's counts and scores. An empty prediction has precision 0."""

    true_positives: int
    predicted: int
    gold: int

    @property
    def precision(self) -> float:
        return self.true_positives / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.true_positives / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score(predicted: Iterable[str], gold: Iterable[str]) -> Score:
    pred, want = set(predicted), set(gold)
    return Score(len(pred & want), len(pred), len(want))


@dataclass(frozen=True)
class Summary:
    n: int
    macro_precision: float
    macro_recall: float
    macro_f1: float
    micro_precision: float
    micro_recall: float
    micro_f1: float

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def summarize(scores: list[Score]) -> Summary:
    n = len(scores)
    if not n:
        return Summary(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    tp = sum(s.true_positives for s in scores)
    micro = Score(tp, sum(s.predicted for s in scores), sum(s.gold for s in scores))
    return Summary(
        n,
        sum(s.precision for s in scores) / n,
        sum(s.recall for s in scores) / n,
        sum(s.f1 for s in scores) / n,
        micro.precision, micro.recall, micro.f1,
    )
