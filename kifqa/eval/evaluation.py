"""An evaluation: the scored questions of a dataset and their figures (``metrics.json``,
``questions.jsonl``): scores, linking accuracy, failure classes, slices, calibration, latency and costs.

:func:`evaluate_predictions` is the one scoring path of every source (:mod:`kifqa.eval.sources`).
"""

from __future__ import annotations

import functools
import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kifqa.errors import KifqaError
from kifqa.eval.calibration import calibrate, curve
from kifqa.eval.confidence_fit import default_rater
from kifqa.eval.datasets import GoldExtender, GoldQuestion
from kifqa.eval.decisions import decision_counts
from kifqa.eval.failures import FAILURES, LINKING, detail_kind
from kifqa.eval.metrics import summarize
from kifqa.eval.pools import PoolRecord
from kifqa.eval.scoring import Scored, score_prediction
from kifqa.eval.silver import PRODUCT
from kifqa.eval.traces import STEPS, costs_per_question, step_timings
from kifqa.runs.results import Prediction
from kifqa.runs.storage import write_private
from kifqa.types import ErrorKind, Result, Trace

T = TypeVar("T")

#: Properties shown in the per-property table and plot.
TOP_PROPERTIES = 15

#: Examples kept per failure class in metrics.json and the report.
EXAMPLES = 3

#: Slices by how many (property, direction) pairs the gold topic has in the base: 0, 1, several.
SLICES = ("no_relation_in_base", "one_relation", "several_relations")
#: Slices by whether the question names its gold topic (:meth:`GoldExtender.names_topic`).
NAMED_SLICES = {True: "topic_named", False: "topic_not_named"}


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    v = sorted(values)

    def q(p: float) -> float:
        return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]

    return {"n": len(v), "mean": round(statistics.fmean(v), 4), "p50": round(q(0.5), 4),
            "p90": round(q(0.9), 4), "p99": round(q(0.99), 4), "max": round(v[-1], 4)}


@dataclass(frozen=True, kw_only=True)
class About:
    """What an evaluation answered and with what (``metrics.json`` leaves out what is not known)."""

    dataset: str = ""
    model: str = ""
    kb: str = ""
    examples: str = ""
    #: Questions answered at once (in-process).
    concurrency: int | None = None
    #: Where the drafts came from when not from the model (``gold (oracle)``).
    drafts: str | None = None
    #: The example pool that answered, and how many scored questions it holds (:mod:`kifqa.eval.pools`).
    pool: PoolRecord | None = None
    #: ``hard base`` where the gold was extended with the hard build's namesakes (:class:`GoldExtender`).
    gold: str | None = None


@dataclass(frozen=True, kw_only=True)
class RunCoverage:
    """How the questions of a scored batch run folder meet the dataset's."""

    #: The run folder.
    run: str
    #: Questions with a trace in the run.
    run_questions: int
    run_questions_not_in_dataset: int
    #: Scored questions without a trace (unfinished shards): they count as errors.
    run_missing: int
    #: Questions of the run's corpus without a trace and not scored (the corpus file is gone or changed).
    run_missing_unscored: int | None = None


@dataclass(frozen=True, kw_only=True)
class BatchOutcome:
    """How the batch job that answered an evaluation ended."""

    ok: bool
    seconds: float
    startup_s: float
    shards_failed: list[int]


@dataclass
class Evaluation:
    scored: list[Scored]
    wall_s: float
    #: Names properties and entities in reports (optional).
    extender: GoldExtender | None = None
    about: About = field(default_factory=About)
    #: Set when scored from a batch run folder.
    run: RunCoverage | None = None
    #: Set when the batch job answered the questions.
    batch: BatchOutcome | None = None
    #: The oracle-draft diagnostic (:func:`kifqa.eval.oracle.loss_by_step`), when it ran.
    oracle_drafts: dict[str, Any] | None = None

    def property_label(self, prop: str) -> str:
        if self.extender is None:
            return prop
        return self.extender.property_label(prop)

    def by_property(self, top: int = TOP_PROPERTIES) -> list[dict[str, Any]]:
        """The ``top`` most frequent gold properties: questions, macro P/R/F1, relation accuracy."""
        groups: dict[str, list[Scored]] = defaultdict(list)
        for s in self.scored:
            if s.gold.property:
                groups[s.gold.property].append(s)
        out = []
        for prop, items in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:top]:
            gold_items = [s.score for s in items if s.has_gold]
            summary = summarize(gold_items)
            rel = [r for s in items if (r := s.linking.get("relation")) is not None]
            pid = items[0].gold.pid
            out.append({
                "property": prop, "label": self.property_label(pid) + (" (inverse)" if items[0].gold.inverse and
                                                                       items[0].gold.sqwd_style else ""),
                "questions": len(items), "answers_scored": summary.n,
                "precision": round(summary.macro_precision, 4) if summary.n else None,
                "recall": round(summary.macro_recall, 4) if summary.n else None,
                "f1": round(summary.macro_f1, 4) if summary.n else None,
                "relation_accuracy": round(sum(rel) / len(rel), 4) if rel else None,
            })
        return out

    def latency(self) -> dict[str, dict[str, float]]:
        """Per-step seconds (mean and percentiles) over the questions that reached the step."""
        timings = step_timings(s.trace for s in self.scored)
        return {step: _stats(timings[step]) for step in STEPS}

    def linking_accuracy(self) -> dict[str, dict[str, float | None]]:
        out = {}
        for key in LINKING:
            checks = [c for s in self.scored if (c := s.linking.get(key)) is not None]
            out[key] = {"n": len(checks), "correct": sum(checks),
                        "accuracy": round(sum(checks) / len(checks), 4) if checks else None}
        return out

    @functools.cached_property
    def topics(self) -> list[tuple[int | None, bool | None]]:
        """For each scored question (in order), how many (property, direction) pairs its gold topic has in the base
        and whether it names that topic (:meth:`GoldExtender.names_topic`); read once, for the slices and the rows."""
        return [self._topic(s.gold) for s in self.scored]

    def _topic(self, gold: GoldQuestion) -> tuple[int | None, bool | None]:
        """:attr:`topics` of one question."""
        return (self._from_data(lambda extender: extender.topic_relations(gold.topic)),
                self._from_data(lambda extender: extender.names_topic(gold)))

    def _from_data(self, get: Callable[[GoldExtender], T]) -> T | None:
        """What ``get`` reads from the data folder through :attr:`extender`; ``None`` without one, or where the
        folder lacks the base's statements or names (then there are no slices)."""
        if self.extender is None:
            return None
        try:
            return get(self.extender)
        except (OSError, KifqaError):
            return None

    def slices(self) -> dict[str, dict[str, Any]]:
        """The metrics on questions whose topic entity has one (property, direction) in the base, on
        those with several, on those whose topic has none there, and on those that name their topic and
        those that do not (each only when not empty)."""
        groups: dict[str, list[Scored]] = defaultdict(list)
        for s, (n, named) in zip(self.scored, self.topics):
            if n is not None:
                groups[SLICES[min(n, 2)]].append(s)
            if named is not None:
                groups[NAMED_SLICES[named]].append(s)
        out = {}
        for name in (SLICES[1], SLICES[2], SLICES[0], *NAMED_SLICES.values()):
            if groups[name]:
                m = Evaluation(groups[name], 0.0, extender=self.extender).core_metrics()
                out[name] = m
        return out

    def answered(self) -> dict[str, Any]:
        """How many questions with gold got answers, and their macro precision."""
        answering = [s.score.precision for s in self.scored if s.has_gold and s.predicted]
        return {"questions": len(answering),
                "precision": round(statistics.fmean(answering), 4) if answering else None}

    def calibration(self) -> dict[str, Any]:
        """Answer precision against coverage by silver-confidence threshold (:mod:`kifqa.eval.calibration`): the
        risk–coverage curve of the confidence kifqa rates silver rows with (``method``); where that is a fitted
        one, also the hand-set product's curve (``product_curve``), to set them side by side."""
        with_gold = [s for s in self.scored if s.has_gold]
        rater = default_rater()
        out = calibrate([(rater.rate(s.trace, len(s.predicted)), s.score.precision) if s.predicted else None
                         for s in with_gold])
        out["method"] = rater.method
        if rater is not PRODUCT:
            out["product_curve"] = curve([(PRODUCT.rate(s.trace, len(s.predicted)), s.score.precision)
                                          for s in with_gold if s.predicted], len(with_gold))
        return out

    def core_metrics(self) -> dict[str, Any]:
        """Scores, linking, failure classes and cost per question (what every slice reports)."""
        m = self.metrics(slices=False)
        for key in ("failure_examples", "by_property", "latency_s", "wall_s", "questions_per_s", "calibration"):
            m.pop(key, None)
        return m

    def metrics(self, *, slices: bool = True) -> dict[str, Any]:
        n = len(self.scored) or 1
        answered = [s for s in self.scored if s.has_gold]
        single = [s.score for s in answered if len(s.expected) == 1]
        traces = [s.trace for s in self.scored]
        failures = Counter(s.failure for s in self.scored if s.failure)
        details: dict[str, Counter[str]] = defaultdict(Counter)
        examples: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for s in self.scored:
            if not s.failure:
                continue
            details[s.failure][detail_kind(s.detail)] += 1
            if len(examples[s.failure]) < EXAMPLES:
                examples[s.failure].append({
                    "id": s.gold.id, "question": s.gold.text,
                    "draft": [str(p) for p in s.trace.draft],
                    "detail": s.detail, "gold": sorted(s.expected)[:5], "predicted": sorted(s.predicted)[:5]})
        return {
            "questions": len(self.scored),
            "answers_scored": len(answered),
            "correct": sum(s.score.f1 >= 1.0 for s in answered),
            "all": summarize([s.score for s in answered]).as_dict(),
            "single_answer": summarize(single).as_dict(),
            "linking": self.linking_accuracy(),
            "answered": self.answered(),
            "decisions": decision_counts((s.gold, s.trace) for s in self.scored),
            "failures": {k: failures.get(k, 0) / n for k in FAILURES},
            "failure_counts": {k: failures.get(k, 0) for k in FAILURES},
            "failure_details": {k: dict(details[k].most_common()) for k in FAILURES if details[k]},
            "failure_examples": {k: examples[k] for k in FAILURES if examples[k]},
            "by_property": self.by_property(),
            "latency_s": self.latency(),
            **costs_per_question(traces),
            "wall_s": round(self.wall_s, 2),
            "questions_per_s": round(len(self.scored) / self.wall_s, 3) if self.wall_s else 0.0,
            **({"slices": self.slices(), "calibration": self.calibration()} if slices else {}),
            **self._provenance(),
        }

    def _provenance(self) -> dict[str, Any]:
        """What was answered, how and from where: the known fields of :attr:`about` and :attr:`run`,
        then :attr:`oracle_drafts` and :attr:`batch`."""
        known = {k: v for k, v in asdict(self.about).items() if v not in (None, "")}
        if self.oracle_drafts is not None:
            known["oracle_drafts"] = self.oracle_drafts
        if self.run is not None:
            known.update({k: v for k, v in asdict(self.run).items() if v is not None})
        if self.batch is not None:
            known["batch"] = asdict(self.batch)
        return known

    def write(self, out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """``metrics.json`` and ``questions.jsonl``, each written whole and private (mode 0600, as a run
        folder's files: they hold the questions and answers); returns the metrics and the rows written (the
        reports are :func:`kifqa.report.sources.write_evaluation`'s)."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        metrics = self.metrics()
        write_private(out / "metrics.json", (json.dumps(metrics, indent=2, ensure_ascii=False) + "\n").encode())
        rows = [{**s.row(), "topic_relations": n, "names_topic": named}
                for s, (n, named) in zip(self.scored, self.topics)]
        write_private(out / "questions.jsonl", "".join(json.dumps(row, ensure_ascii=False) + "\n"
                                                       for row in rows).encode())
        return metrics, rows


def evaluate_predictions(questions: list[GoldQuestion], predictions: Mapping[str, Prediction],
                         extender: GoldExtender | None, *, wall_s: float = 0.0,
                         results: Mapping[str, Result] | None = None) -> Evaluation:
    """Scores ``questions`` against ``predictions`` by question id: the one scoring path of every
    source. A question without a prediction is scored as an error (``missing`` step)."""
    scored = []
    for q in questions:
        p = predictions.get(q.id)
        if p is None:
            trace = Trace(q.id, q.text)
            trace.fail(ErrorKind.MISSING, "no trace in the run", step="missing")
            p = Prediction(question_id=q.id, answers={}, trace=trace)
        scored.append(score_prediction(q, p, extender, result=(results or {}).get(q.id)))
    return Evaluation(scored, wall_s, extender=extender)
