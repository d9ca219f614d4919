"""Where an evaluation's answers come from, one scoring path for all: answered in-process
(:func:`evaluate`), read from a batch run folder (:func:`evaluate_run`) or answered by the batch job
first (:func:`evaluate_batch`); :func:`predict` answers questions in-process or with the batch job
(``kifqa eval`` and ``kifqa silver``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kifqa.eval.datasets import GoldExtender, GoldQuestion
from kifqa.eval.evaluation import BatchOutcome, Evaluation, RunCoverage, evaluate_predictions
from kifqa.eval.scoring import Scored, score_prediction
from kifqa.pipeline.schedule import Answerer, answer_all
from kifqa.runs.results import Prediction, read_run, run_corpus_ids, run_corpus_size, run_seconds
from kifqa.types import Question, Result

if TYPE_CHECKING:
    from kifqa.batch.summary import Summary

@dataclass
class Predicted:
    """What :func:`predict` gives: a prediction per question id and the answering time."""

    predictions: dict[str, Prediction]
    wall_s: float
    #: The in-process results by question id (none from the batch job).
    results: dict[str, Result] = field(default_factory=dict)
    #: The batch job's summary (answered by it only).
    job: Summary | None = None

    @property
    def batch(self) -> BatchOutcome | None:
        """How the batch job ended, when it answered."""
        if self.job is None:
            return None
        return BatchOutcome(ok=self.job.ok, seconds=self.job.seconds, startup_s=self.job.startup_s,
                            shards_failed=list(self.job.shards_failed))


def predict(settings: Any, questions: list[Question], *, via: Literal["process", "batch"] = "process",
            out: Path | None = None, corpus: Path | None = None, concurrency: int = 1,
            progress: Callable[[Result], None] | None = None, drafts: Mapping[str, str] | None = None,
            **run_job_options: Any) -> Predicted:
    """Answers ``questions`` as ``settings`` say: ``via="process"`` in-process on ``concurrency`` lanes
    (``progress`` gets each result; ``drafts`` replace the model's by question id), ``via="batch"``
    with the batch job into the run folder ``out`` (on the file ``corpus`` as it is when given, else on
    ``out/corpus.jsonl`` written from ``questions``; ``run_job_options`` go to
    :func:`kifqa.batch.run_job`)."""
    if via == "batch":
        from kifqa.batch import run_job

        if out is None:
            raise ValueError("predict(via='batch') needs out, the run folder")
        out = Path(out)
        if corpus is None:
            corpus, settings = write_corpus(questions, out / "corpus.jsonl"), corpus_settings(settings)
        summary = run_job(settings, corpus, out, **run_job_options)
        return Predicted(read_run(out), run_seconds(out), job=summary)
    from kifqa.api import open_pipeline
    from kifqa.llm.factory import in_process_instances

    async def run() -> Predicted:
        async with open_pipeline(settings=settings, instances=in_process_instances(settings)) as pipeline:
            return await answer(pipeline.with_oracle_drafts(drafts) if drafts else pipeline, questions,
                                concurrency=concurrency, progress=progress)

    return asyncio.run(run())


async def answer(pipeline: Answerer, questions: list[Question], *, concurrency: int = 1,
                 progress: Callable[[Result], None] | None = None) -> Predicted:
    """Answers ``questions`` on ``pipeline`` (:func:`kifqa.pipeline.schedule.answer_all`), timed."""
    start = time.perf_counter()
    results = await answer_all(pipeline, questions, concurrency=concurrency, progress=progress)
    wall = time.perf_counter() - start
    return Predicted({r.question.id: Prediction.from_result(r) for r in results}, wall,
                     results={r.question.id: r for r in results})


def scoring_progress(questions: list[GoldQuestion], extender: GoldExtender | None,
                     progress: Callable[[Scored], None] | None) -> Callable[[Result], None] | None:
    """A :func:`predict` progress callback that hands ``progress`` each result scored."""
    if progress is None:
        return None
    by_id = {q.id: q for q in questions}

    def scored(result: Result) -> None:
        progress(score_prediction(by_id[result.question.id], Prediction.from_result(result), extender, result=result))

    return scored


def score_predicted(questions: list[GoldQuestion], predicted: Predicted, extender: GoldExtender | None) -> Evaluation:
    """Scores what :func:`predict` gave (:func:`~kifqa.eval.evaluation.evaluate_predictions`)."""
    return evaluate_predictions(questions, predicted.predictions, extender, wall_s=predicted.wall_s,
                                results=predicted.results)


def as_questions(questions: list[GoldQuestion]) -> list[Question]:
    """The gold questions as the pipeline's input (id and text)."""
    return [Question(q.id, q.text) for q in questions]


async def evaluate(pipeline: Answerer, questions: list[GoldQuestion], extender: GoldExtender, *,
                   concurrency: int = 1, progress: Callable[[Scored], None] | None = None) -> Evaluation:
    """Answers ``questions`` on ``pipeline`` (``concurrency`` at a time) and scores them."""
    predicted = await answer(pipeline, as_questions(questions), concurrency=concurrency,
                             progress=scoring_progress(questions, extender, progress))
    return score_predicted(questions, predicted, extender)


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


def write_corpus(questions: list[Question], path: Path) -> Path:
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
    predicted = predict(settings, as_questions(questions), via="batch", out=out, **run_job_options)
    evaluation = evaluate_run(out, questions, extender, require_all=True)
    evaluation.batch = predicted.batch
    return evaluation
