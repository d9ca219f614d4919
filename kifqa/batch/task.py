"""One shard task: run a shard's questions concurrently through the pipeline and write its files."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import ray
from ray import ObjectRef
from ray.actor import ActorHandle

from kifqa.batch.clock import within
from kifqa.batch.kbpool import ActorKB, KBFactory, TaskKB
from kifqa.batch.llmpool import ActorLLM
from kifqa.config import Settings
from kifqa.examples.embeddings import keep
from kifqa.kb.base import KBStats, KnowledgeBase
from kifqa.llm.base import LLM
from kifqa.pipeline.schedule import Answerer, in_prefix_order
from kifqa.redact import redact
from kifqa.resilience import open_circuits
from kifqa.runs.corpus import Rows
from kifqa.runs.folder import RunFolder
from kifqa.runs.schema import ANSWER_SCHEMA, TRACE_SCHEMA
from kifqa.types import ErrorKind, Question, Result, Trace


class PipelineFactory(Protocol):
    """Builds the pipeline a task runs its questions through (:func:`default_pipeline`)."""

    def __call__(self, *, kb: KnowledgeBase, llm: LLM, settings: Settings) -> Answerer: ...


def default_pipeline(*, kb: KnowledgeBase, llm: LLM, settings: Settings) -> Answerer:
    """The pipeline of ``kifqa ask``."""
    from kifqa.pipeline import Pipeline

    return Pipeline.from_settings(kb=kb, llm=llm, settings=settings)


@dataclass(frozen=True)
class Shard:
    """A slice of the corpus (the task reads its questions); ``redo`` names the only questions to rerun
    in a finished shard."""

    index: int
    rows: Rows
    redo: frozenset[str] | None = None


@dataclass(frozen=True)
class TaskContext:
    """What every shard task of a job shares."""

    job: str
    settings: Settings
    out: str
    #: The KB actors' proxy; ``None``: each task's worker opens the knowledge base with ``open_kb``.
    kb: ActorKB | None
    open_kb: KBFactory
    llm: ActorLLM
    pipeline: PipelineFactory
    progress: ActorHandle
    #: The pools' readiness (:attr:`~kifqa.batch.pools.Pools.ready`): a task prepares its questions, then waits for it.
    ready: tuple[ObjectRef[Any], ...] = ()
    #: The example pool's embeddings, computed once for the job, by cache file under ``settings.cache_dir``.
    pool_embeddings: tuple[tuple[str, ObjectRef[Any]], ...] = ()


@dataclass(frozen=True)
class ShardRun:
    """What one shard task did: questions run and the CPU seconds its worker process spent on them."""

    questions: int
    cpu_s: float
    #: Knowledge-base calls the task made and how many its cache answered, where it opened the base.
    kb_calls: int = 0
    kb_cache_hits: int = 0


def run_shard(shard: Shard, ctx: TaskContext) -> ShardRun:
    """Answers the shard's questions and writes its files atomically (the body of the Ray task)."""
    cpu = time.process_time()
    shard_questions = shard.rows.questions()
    questions = shard_questions if shard.redo is None else [q for q in shard_questions if q.id in shard.redo]
    results, kb = asyncio.run(_answer_all(questions, ctx))
    answers = pa.Table.from_pylist([row for r in results for row in r.answer_rows()], schema=ANSWER_SCHEMA)
    traces = pa.Table.from_pylist([r.trace.to_row() for r in results], schema=TRACE_SCHEMA)
    output = RunFolder(ctx.out)
    if shard.redo is not None:
        answers, traces = _merge(output, shard, shard_questions, answers, traces)
    output.write_shard(shard.index, answers, traces)
    return ShardRun(len(results), time.process_time() - cpu, kb_calls=kb.calls, kb_cache_hits=kb.cache_hits)


async def _answer_all(questions: list[Question], ctx: TaskContext) -> tuple[list[Result], KBStats]:
    """The results of ``questions`` in order, and the calls this task made to a knowledge base of its own."""
    pipeline, kb = await _job(ctx)
    before = await kb.stats() if kb is not None else KBStats()
    slots = asyncio.Semaphore(ctx.settings.batch.task_concurrency)
    timeout = ctx.settings.batch.question_timeout_s
    progress = _Progress(ctx.progress)

    async def answer(question: Question) -> Result:
        if question.error is not None:
            result = _failed(question, ctx, ErrorKind.INPUT, question.error, "input")
        else:
            async with slots:
                try:
                    result = await within(pipeline.answer(question), timeout)
                except TimeoutError:
                    result = _failed(question, ctx, ErrorKind.TIMEOUT,
                                     f"no answer after {timeout:g} s of its own (its KB calls aside)", "timeout")
                except Exception as err:  # noqa: BLE001 - the pipeline should not raise; if it does, one
                    # question gets an error trace instead of its whole shard failing
                    result = _failed(question, ctx, ErrorKind.INTERNAL, f"{type(err).__name__}: {err}", "pipeline")
        progress.add()
        return result

    # Questions sharing a few-shot block go one after another, so their draft calls reach the same
    # LLM actor together; the results keep the shard's order.
    pipeline.prepare(questions)
    ordered = in_prefix_order(pipeline.examples, questions)
    await asyncio.gather(*ctx.ready)
    reporting = asyncio.create_task(report_circuits(ctx.progress)) if kb is not None else None
    try:
        done = dict(zip(map(id, ordered), await asyncio.gather(*(answer(q) for q in ordered)), strict=True))
    finally:
        progress.flush()
        if reporting is not None:
            reporting.cancel()
    after = await kb.stats() if kb is not None else KBStats()
    used = KBStats(calls=after.calls - before.calls, cache_hits=after.cache_hits - before.cache_hits)
    return [done[id(q)] for q in questions], used


#: Seconds between two reports of a task's open circuits (where it opens its own knowledge base).
REPORT_S = 1.0


async def report_circuits(counter: ActorHandle) -> None:
    """Tells the driver's counter every :data:`REPORT_S` which endpoints this process finds down (its own
    knowledge base's: the actors tell theirs themselves), so that the progress line shows an outage."""
    task, said = uuid.uuid4().hex, False
    while True:
        down = open_circuits()
        if down or said:
            counter.report.remote(task, down)
            said = bool(down)
        await asyncio.sleep(REPORT_S)


class _Progress:
    """Reports finished questions to the driver's counter at most every ``every_s`` seconds (one
    actor call per question cost the tasks and the counter a Ray call each)."""

    def __init__(self, counter: ActorHandle, every_s: float = 0.5) -> None:
        self._counter = counter
        self._every_s = every_s
        self._pending = 0
        self._last = time.monotonic()

    def add(self) -> None:
        self._pending += 1
        if time.monotonic() - self._last >= self._every_s:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._counter.add.remote(self._pending)
            self._pending, self._last = 0, time.monotonic()


def _failed(question: Question, ctx: TaskContext, kind: ErrorKind, error: str, step: str) -> Result:
    trace = Trace(question.id, question.text, kb=redact(ctx.settings.kb.spec), model=ctx.llm.identity)
    trace.fail(kind, error, step=step)
    return Result(question, [], trace)


#: This worker process's pipeline of the current job, and the knowledge base it opened for it: building
#: them may load models (example retrieval) and open a store, so the tasks of a job that land in the same
#: worker share them.
_JOB: tuple[str, Answerer, TaskKB | None] | None = None


async def _job(ctx: TaskContext) -> tuple[Answerer, TaskKB | None]:
    """The pipeline of ``ctx``'s job in this worker and its own knowledge base, if it opens one (a
    previous job's is closed)."""
    global _JOB
    if _JOB is None or _JOB[0] != ctx.job:
        if _JOB is not None and _JOB[2] is not None:
            await _JOB[2].aclose()
        _JOB = None
        save_pool_embeddings(ctx.settings.cache_dir, ctx.pool_embeddings)
        own = TaskKB(ctx.settings, ctx.open_kb) if ctx.kb is None else None
        kb: KnowledgeBase = own if own is not None else ctx.kb  # type: ignore[assignment]  # one of them is set
        _JOB = (ctx.job, ctx.pipeline(kb=kb, llm=ctx.llm, settings=ctx.settings), own)
    return _JOB[1], _JOB[2]


def save_pool_embeddings(cache_dir: Path, shipped: tuple[tuple[str, ObjectRef[Any]], ...]) -> None:
    """Saves the job's pool embeddings (:attr:`TaskContext.pool_embeddings`) that this node's ``cache_dir``
    lacks, fetched from the object store only then, so that the pipeline loads them instead of encoding the pool."""
    for name, ref in shipped:
        cache = cache_dir / name
        if not cache.exists():
            keep(cache, ray.get(ref))


def _merge(output: RunFolder, shard: Shard, questions: list[Question], answers: pa.Table,
           traces: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The finished shard's rows with those of the rerun questions replaced, in corpus order."""
    old_answers, old_traces = output.read_shard(shard.index)
    redo = pa.array(sorted(shard.redo or ()), pa.string())
    position = {q.id: i for i, q in enumerate(questions)}

    def merge(old: pa.Table, new: pa.Table) -> pa.Table:
        kept = old.filter(pc.invert(pc.is_in(old["question_id"], value_set=redo)))
        table = pa.concat_tables([kept, new])
        rank = pa.array([position[q] for q in table["question_id"].to_pylist()], pa.int64())
        return table.take(pc.array_sort_indices(rank))

    return merge(old_answers, answers), merge(old_traces, traces)
