"""Scores a pipeline on a gold dataset: per-question scores, linking accuracy, failure classes, costs.

One scoring path for every source: :func:`evaluate_predictions` scores (question id →
:class:`~kifqa.runs.results.Prediction`) pairs. :func:`evaluate` gets them by answering in-process,
:func:`evaluate_run` from a batch run folder, :func:`evaluate_batch` by running the batch job first.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from kifqa.data.ids import same_id
from kifqa.eval.calibration import calibrate
from kifqa.errors import KifqaError
from kifqa.eval.datasets import GoldExtender, GoldQuestion
from kifqa.eval.metrics import Score, score, summarize
from kifqa.eval.silver import confidence
from kifqa.eval.traces import STEPS, costs_per_question, step_timings
from kifqa.runs.results import Prediction, read_run, run_corpus_ids, run_corpus_size, run_seconds
from kifqa.types import ErrorKind, Question, Result, Trace
from kifqa.pipeline import Pipeline
from kifqa.data.text import normalize
from kifqa.pipeline.text import tokens

#: Failure classes, in the order they are checked.
FAILURES = ("error", "draft", "entity", "relation", "empty", "partial")

#: Linking checks against the gold triple (see :func:`linking`).
LINKING = ("entity", "relation", "property", "triple")

#: Properties shown in the per-property table and plot.
TOP_PROPERTIES = 15

#: Examples kept per failure class in metrics.json and the report.
EXAMPLES = 3

#: Slices by how many (property, direction) pairs the gold topic has in the base: 0, 1, several.
SLICES = ("no_relation_in_base", "one_relation", "several_relations")


def confidence_of(s: Scored) -> float:
    """The silver confidence of a scored question's answers (:func:`kifqa.eval.silver.confidence`)."""
    return confidence(s.trace, len(s.predicted)).value


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


# --- linking accuracy and failure classes -----------------------------------------------------------

def linking(gold: GoldQuestion, trace: Trace) -> dict[str, bool | None]:
    """Entity and relation linking against the gold triple (``None`` where the dataset has no gold):

    - ``entity``: the gold topic entity is among the kept entities;
    - ``relation``: a chosen relation has a gold property in its gold direction;
    - ``property``: a chosen relation has a gold property (either direction);
    - ``triple``: one chosen relation has the gold topic, a gold property and its direction.
    """
    chosen = [(r.entity, r.property, r.direction) for r in trace.relations]
    want = gold.relations
    topic = gold.topic

    def rel_ok(p: str, d: str) -> bool:
        return any(same_id(p, g.property) and d == g.direction for g in want)

    return {
        "entity": any(same_id(topic, e) for e in trace.entities) if topic else None,
        "relation": any(rel_ok(p, d) for _, p, d in chosen) if want else None,
        "property": any(same_id(p, g.property) for _, p, _ in chosen for g in want) if want else None,
        "triple": any(same_id(topic, e) and rel_ok(p, d) for e, p, d in chosen) if topic and want else None,
    }


def resembles(text: str, names: list[str]) -> bool:
    """True when ``text`` is (nearly) one of ``names``: equal, contained, or close in spelling."""
    k = normalize(text)
    if not k:
        return False
    for name in names:
        n = normalize(name)
        if not n:
            continue
        if k == n or (min(len(k), len(n)) >= 3 and (k in n or n in k)):
            return True
        if SequenceMatcher(None, k, n).ratio() >= 0.6:
            return True
        a, b = tokens(k), tokens(n)
        if a and b and len(a & b) / len(a | b) >= 0.5:
            return True
    return False


def failure_of(gold: GoldQuestion, trace: Trace, predicted: set[str], s: Score, *,
               has_gold: bool = True, names: list[str] | None = None) -> tuple[str | None, str | None]:
    """Why a question fell short of F1 = 1, and a detail (``(None, None)`` if it did not).

    Checked in order: ``draft`` (the draft step failed to give a pattern, or the pattern's known
    entity is not the gold topic at all: the unknown is in the wrong place), ``error`` (any other
    error outside the entity and relation steps, or a failed model call: :attr:`ErrorKind.MODEL`), ``entity`` (the gold
    topic entity is not among the kept entities), ``relation`` (no chosen relation has the gold
    property in the gold direction), ``empty`` (no answer), ``partial`` (answers, but not exactly
    the gold ones). Questions without gold answers (SimpleDBpediaQA) get a class only from the
    trace and the gold triple. ``names`` (the gold topic's names) enable the wrong-unknown check.
    """
    if has_gold and s.f1 >= 1.0:
        return None, None
    step, error = trace.error_step, trace.error
    if trace.error_kind is ErrorKind.MODEL:
        return "error", f"{step}: {error}"
    if step == "draft":
        return "draft", f"malformed: {error}"
    if error and step not in ("entities", "relations"):
        return "error", f"{step}: {error}"
    link = linking(gold, trace)
    if gold.topic:
        if not link["entity"]:
            if any(same_id(gold.topic, c.id) for c in trace.candidates):
                return "entity", "found by the search but not kept"
            known = trace.draft[0].known if trace.draft else ""
            if known and names and not resembles(known, names):
                return "draft", f"wrong unknown: drafted {known!r} as the known entity, gold topic is {names[0]!r}"
            return "entity", f"not found{f' for {known!r}' if known else ''}" + (f" ({error})" if error else "")
    elif step == "entities":
        return "entity", str(error)
    if gold.relations:
        if not link["relation"]:
            chosen = ", ".join(f"{r.property} {r.direction}" for r in trace.relations) or "none"
            if link["property"]:
                return "relation", f"wrong direction (chose {chosen})"
            return "relation", f"wrong property (chose {chosen})" + (f"; {error}" if error else "")
    elif step == "relations":
        return "relation", str(error)
    if not predicted:
        return "empty", str(error) if error else "the filters gave no statement"
    if has_gold:
        return "partial", f"{s.true_positives} right of {s.predicted} predicted, {s.gold} gold"
    return None, None


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


# --- evaluations -------------------------------------------------------------------------------------

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
            rel = [s.linking.get("relation") for s in items if s.linking.get("relation") is not None]
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

    def linking_accuracy(self) -> dict[str, dict[str, float]]:
        out = {}
        for key in LINKING:
            checks = [s.linking.get(key) for s in self.scored if s.linking.get(key) is not None]
            out[key] = {"n": len(checks), "correct": sum(checks),
                        "accuracy": round(sum(checks) / len(checks), 4) if checks else None}
        return out

    def topic_relations(self, s: Scored) -> int | None:
        """How many (property, direction) pairs the question's gold topic has in the base."""
        if self.extender is None:
            return None
        try:
            return self.extender.topic_relations(s.gold.topic)
        except (OSError, KifqaError):  # a data folder without the base's statements: no slices
            return None

    def slices(self) -> dict[str, dict[str, Any]]:
        """The metrics on questions whose topic entity has one (property, direction) in the base, on
        those with several, and on those whose topic has none there (each only when not empty)."""
        groups: dict[str, list[Scored]] = defaultdict(list)
        for s in self.scored:
            n = self.topic_relations(s)
            if n is not None:
                groups[SLICES[min(n, 2)]].append(s)
        out = {}
        for name in (SLICES[1], SLICES[2], SLICES[0]):
            if groups[name]:
                m = Evaluation(groups[name], 0.0, extender=self.extender).core_metrics()
                out[name] = m
        return out

    def calibration(self) -> dict[str, Any]:
        """Answer precision against coverage by silver-confidence threshold (:mod:`kifqa.eval.calibration`)."""
        return calibrate([(confidence_of(s), s.score.precision) if s.predicted else None
                          for s in self.scored if s.has_gold])

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
            details[s.failure][_detail_kind(s.detail)] += 1
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
        """``metrics.json`` and ``questions.jsonl``; returns the metrics and the rows written (the
        reports are :func:`kifqa.report.sources.write_evaluation`'s)."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        metrics = self.metrics()
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
        rows = [{**s.row(), "topic_relations": self.topic_relations(s)} for s in self.scored]
        with (out / "questions.jsonl").open("w") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return metrics, rows


def _detail_kind(detail: str | None) -> str:
    """The kind of a failure detail, without its particulars (``wrong property (chose P1 ...)`` →
    ``wrong property``)."""
    if not detail:
        return ""
    return detail.split(" (")[0].split(":")[0].split(";")[0].strip()


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


async def answer_all(pipeline: Pipeline, questions: list[Question], *, concurrency: int = 1,
                     progress: Callable[[Result], None] | None = None) -> list[Result]:
    """Answers ``questions`` in-process on ``concurrency`` lanes and returns the results in input order.

    Each lane answers one share of a few-shot block's questions after another
    (:func:`block_shares`), so the questions in flight at once mostly use different blocks: llama.cpp
    gives each lane's next prompt the slot that holds its block, and a block is evaluated once per
    share instead of once per slot."""
    lanes = max(1, concurrency)
    shares = block_shares(pipeline.prefix_groups(questions), lanes=lanes)
    done: dict[int, Result] = {}

    async def lane() -> None:
        while shares:
            for q in shares.pop(0):
                done[id(q)] = result = await pipeline.answer(q)
                if progress is not None:
                    progress(result)

    await asyncio.gather(*(lane() for _ in range(min(lanes, len(shares)))))
    return [done[id(q)] for q in questions]


def block_shares(groups: list[list[Question]], *, lanes: int) -> list[list[Question]]:
    """The groups cut into shares of at most half a lane's fair part (so that the lanes finish
    together), biggest first."""
    size = max(1, -(-sum(map(len, groups)) // (2 * lanes)))
    shares = [g[i:i + size] for g in groups for i in range(0, len(g), size)]
    return sorted(shares, key=len, reverse=True)


async def evaluate(pipeline: Pipeline, questions: list[GoldQuestion], extender: GoldExtender, *,
                   concurrency: int = 1, progress: Any = None) -> Evaluation:
    """Answers ``questions`` (``concurrency`` at a time) and scores them."""
    by_id = {q.id: q for q in questions}

    def scored_progress(result: Result) -> None:
        if progress is not None:
            q = by_id[result.question.id]
            progress(score_prediction(q, Prediction.from_result(result), extender, result=result))

    start = time.perf_counter()
    results = await answer_all(pipeline, [Question(q.id, q.text) for q in questions], concurrency=concurrency,
                               progress=scored_progress)
    wall = time.perf_counter() - start
    return evaluate_predictions(questions, {r.question.id: Prediction.from_result(r) for r in results}, extender,
                                wall_s=wall, results={r.question.id: r for r in results})


def evaluate_run(folder: str | Path, questions: list[GoldQuestion], extender: GoldExtender | None, *,
                 limit: int | None = None, require_all: bool = False) -> Evaluation:
    """Scores a batch run folder: the questions of ``questions`` that are in the run's corpus (in
    dataset order, the first ``limit`` of them); with ``require_all``, all of ``questions``. A
    question without a trace (an unfinished shard) counts as an error; ``run_missing`` says how
    many. When the corpus cannot be read, the questions with a trace are scored and
    ``run_missing_unscored`` counts the corpus questions without one."""
    predictions = read_run(folder)
    gold_ids = {q.id for q in questions}
    corpus = None if require_all else run_corpus_ids(folder)
    if require_all:
        chosen = questions
    else:
        wanted = predictions.keys() | (corpus or set())
        chosen = [q for q in questions if q.id in wanted]
    if limit:
        chosen = chosen[:limit]
    evaluation = evaluate_predictions(chosen, predictions, extender, wall_s=run_seconds(folder))
    unscored = None
    if corpus is None and not require_all:
        expected = run_corpus_size(folder)
        if expected is not None and expected > len(predictions):
            unscored = expected - len(predictions)
    evaluation.run = RunCoverage(run=str(Path(folder).absolute()), run_questions=len(predictions),
                                 run_questions_not_in_dataset=sum(1 for qid in predictions if qid not in gold_ids),
                                 run_missing=sum(1 for q in chosen if q.id not in predictions),
                                 run_missing_unscored=unscored)
    return evaluation


def write_corpus(questions: list[GoldQuestion], path: Path) -> Path:
    """The questions as a ``kifqa run`` corpus (JSONL with ``id`` and ``question``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({"id": q.id, "question": q.text}, ensure_ascii=False) + "\n" for q in questions)
    if not path.is_file() or path.read_text() != text:  # unchanged: the job's corpus hash stays (resume)
        path.write_text(text)
    return path


def corpus_settings(settings: Any) -> Any:
    """``settings`` reading the columns :func:`write_corpus` writes."""
    return settings.override(batch={"id_column": "id", "question_column": "question"})


def evaluate_batch(settings: Any, questions: list[GoldQuestion], extender: GoldExtender, out: Path,
                   **run_job_options: Any) -> Evaluation:
    """Runs the batch job (:func:`kifqa.batch.run_job`) on ``questions`` into ``out`` (a run folder,
    with ``corpus.jsonl``), then scores it. ``run_job_options`` go to ``run_job`` (doubles, progress)."""
    from kifqa.batch import run_job

    out = Path(out)
    corpus = write_corpus(questions, out / "corpus.jsonl")
    summary = run_job(corpus_settings(settings), corpus, out, **run_job_options)
    evaluation = evaluate_run(out, questions, extender, require_all=True)
    evaluation.batch = BatchOutcome(ok=summary.ok, seconds=summary.seconds, startup_s=summary.startup_s,
                                    shards_failed=list(summary.shards_failed))
    return evaluation
