"""The job driver: read the corpus, cut it into shards, run one task per shard on the actor pools."""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import ray
from ray import ObjectRef
from ray.exceptions import RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from tqdm import tqdm

from kifqa.batch.kbpool import KBFactory
from kifqa.batch.llmpool import LLMFactory, cluster_cpus
from kifqa.batch.pools import Pools, connect, job_pools
from kifqa.batch.preflight import check_job
from kifqa.batch.summary import RunMeasures, Summary, job_summary
from kifqa.batch.task import REPORT_S, PipelineFactory, Shard, TaskContext, default_pipeline, run_shard
from kifqa.config import Settings
from kifqa.errors import ConfigError, JobStopped
from kifqa.runs.corpus import read_corpus
from kifqa.runs.folder import RunFolder, SetAside
from kifqa.runs.manifest import job_key, new_manifest, now

log = logging.getLogger(__name__)

#: Seconds between two looks at the endpoints' circuits for the progress line.
_LOOK_S = 2.0


@ray.remote(num_cpus=0)
class Progress:
    """Counts the questions the tasks have finished, and keeps what the tasks that open their own knowledge
    base last said of its endpoint's circuit."""

    def __init__(self) -> None:
        self._done = 0
        self._down: dict[str, dict[str, float]] = {}
        self._said: dict[str, float] = {}

    def add(self, n: int) -> None:
        self._done += n

    def done(self) -> int:
        return self._done

    def report(self, task: str, down: dict[str, float]) -> None:
        """Task ``task``'s open circuits now (:func:`~kifqa.resilience.open_circuits`)."""
        self._down[task], self._said[task] = down, time.monotonic()

    def open_circuits(self) -> dict[str, float]:
        """The endpoints a task said were down within the last :data:`~kifqa.batch.task.REPORT_S` × 3 s, and
        for how long by now."""
        now, down = time.monotonic(), dict[str, float]()
        for task, said in self._said.items():
            if now - said <= 3 * REPORT_S:
                for label, seconds in self._down[task].items():
                    down[label] = max(down.get(label, 0.0), seconds + now - said)
        return down


def run_job(settings: Settings, corpus: str | Path | None = None, out: str | Path | None = None, *,
            pools: Pools | None = None, pipeline: PipelineFactory = default_pipeline,
            open_kb: KBFactory | None = None, open_llm: LLMFactory | None = None,
            progress: bool = True) -> Summary:
    """Answers every question of ``corpus`` into ``out`` (both default to ``settings.batch``; each a local
    path or a URI, :mod:`kifqa.runs.storage`). The job holds ``out`` while it runs (:meth:`RunFolder.lock`):
    :class:`~kifqa.runs.lock.FolderInUse` when another run holds it.

    Runs on ``pools`` (see :func:`~kifqa.batch.pools.actor_pools`) when given; otherwise starts
    them, if there is anything to run, with ``open_kb`` and ``open_llm`` replacing the backends,
    joining the cluster ``settings.batch.ray_address`` names (or starting a local one) unless Ray is
    initialised. ``pipeline`` replaces the pipeline. What is replaced must be picklable.

    Before it reads the corpus, the environment must have what the settings need, on the driver and on the
    cluster's nodes (:func:`~kifqa.batch.preflight.check_job`, else :class:`ConfigError`). Ctrl-C or ``SIGTERM``
    stops the job: the manifest records it and :class:`JobStopped` says what is done.
    """
    b = settings.batch
    corpus, out = b.job_paths(corpus, out)
    shaping = settings.shaping()  # what the job's output depends on, with the corpus
    output = RunFolder(out)
    # Where the tasks open the run folder: a URI as given, with any credentials it carries, or an absolute path.
    target = str(out) if output.remote else str(output.root)
    if pools is None:  # before the corpus is read and hashed; the replaced backends are the caller's
        check_job(settings, out=target, kb=open_kb is None, llm=open_llm is None, pipeline=pipeline is default_pipeline)
    data = read_corpus(corpus, id_column=b.id_column, question_column=b.question_column,
                       max_chars=settings.pipeline.max_question_chars)
    shards = [Shard(i, rows) for i, rows in enumerate(data.rows(b.shard_size))]
    key = job_key(shaping, data)
    output.create()
    with output.lock():
        previous, set_aside, moved = _prepare(output, key, resume=b.resume)
        todo = _todo(shards, output, retry_failed=b.retry_failed)
        manifest = new_manifest(settings, data, key, len(shards), previous)
        if set_aside:
            manifest["runs"][-1]["set_aside"] = [asdict(s) for s in set_aside]
        if moved:
            manifest["runs"][-1]["previous_moved_to"] = moved
        output.write_manifest(manifest)

        started = time.perf_counter()
        run = RunMeasures()
        if todo and pools is None:
            connect(settings)  # before the SIGTERM handler: Ray's own, which prints a C++ stack, comes with it
        try:
            with _stoppable() as terminated:
                if todo:
                    with job_pools(settings, pools, open_kb=open_kb, open_llm=open_llm) as running:
                        if progress and pools is None:
                            _say_stages(running, settings)
                        run = _run_shards(settings, target, todo, running, pipeline, progress,
                                          own_pools=pools is None)
        except KeyboardInterrupt:
            manifest["runs"][-1].update(finished_at=now(), stopped=True)
            manifest.update(status="stopped", finished_at=now())
            output.write_manifest(manifest)
            raise _stopped(output, shards, terminated=bool(terminated)) from None

        output.remove_temporaries()  # the answers of attempts that lost to another attempt of their shard
        summary = job_summary(output, run, n_shards=len(shards), n_todo=len(todo), started=started)
        manifest["runs"][-1].update(finished_at=now(), seconds=round(time.perf_counter() - started, 3),
                                    questions=run.questions, shards=len(todo), shards_failed=run.failed)
        complete = summary.ok and len(output.finished()) == len(shards)
        manifest.update(status="finished" if complete else "incomplete", finished_at=now(),
                        summary=summary.model_dump())
        output.write_manifest(manifest)
        return summary


@contextmanager
def _stoppable() -> Iterator[list[int]]:
    """Turns ``SIGTERM`` into :class:`KeyboardInterrupt` while the block runs (in the main thread), so
    that the job stops as on Ctrl-C; yields the list of the ``SIGTERM`` received (Ray may raise its
    own ``KeyboardInterrupt`` in place of the handler's). A second one is ignored while the job stops."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def terminate(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        received.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield received
    finally:  # a handler Ray installed from C cannot be put back: then the default (end quietly)
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _stopped(output: RunFolder, shards: list[Shard], *, terminated: bool) -> JobStopped:
    """The error that says what a stopped job has done."""
    finished = output.finished()
    answered = sum(len(s.rows) for s in shards if s.index in finished)
    return JobStopped(f"stopped by {'SIGTERM' if terminated else 'Ctrl-C'}: {len(finished)} of {len(shards)} "
                      f"shards written to {output.uri} ({answered} questions)",
                      signum=signal.SIGTERM if terminated else signal.SIGINT)


def _prepare(output: RunFolder, key: str, *, resume: bool
             ) -> tuple[dict[str, Any] | None, list[SetAside], str | None]:
    """Readies the output folder (held by this run): the manifest of the job it resumes, if any, what was
    set aside because it did not read back whole (the manifest, shards), and where a fresh start
    (``resume`` off) moved the previous job's files."""
    previous, set_aside = output.job_manifest()
    moved = None
    if not resume:
        moved = output.move_previous()
        previous = None
    elif previous is not None and previous.get("job_key") != key:
        raise ConfigError(f"{output.uri} holds the output of another job (its config or corpus differ): "
                          "use another output folder, or --no-resume to start over (it moves the finished "
                          "shards to previous-<time>/ in the folder)")
    output.create()
    set_aside += output.set_aside()
    output.remove_temporaries()
    return previous, set_aside, moved


def _todo(shards: list[Shard], output: RunFolder, *, retry_failed: bool) -> list[Shard]:
    """The unfinished shards, and with ``retry_failed`` the finished ones' failed questions."""
    finished = output.finished()
    todo = [s for s in shards if s.index not in finished]
    if retry_failed:
        todo += [replace(s, redo=frozenset(failed)) for s in shards
                 if s.index in finished and (failed := output.failed(s.index))]
        todo.sort(key=lambda s: s.index)
    return todo


def _say_stages(pools: Pools, settings: Settings) -> None:
    """Shows what happens before the first answer: the actors of ``pools`` starting, and the example pool
    embedded on first use (its own bar, in this process: :func:`_shipped_pools`)."""
    kb = "the knowledge base opened in each task" if pools.kb is None else f"{len(pools.kb_actors)} KB actor(s)"
    tqdm.write(f"starting {len(pools.llm_actors)} LLM actor(s) (loading {settings.llm.model}; each few-shot block "
               f"is then restored from cache_dir/kv, or computed once and saved) and {kb}")
    if settings.examples.mode != "fixed":
        tqdm.write("preparing the few-shot examples (the training pool is embedded on first use only)")


def _shipped_pools(settings: Settings) -> tuple[tuple[str, ObjectRef[Any]], ...]:
    """The example pool's embeddings, computed (or loaded from the cache) once for the job in this process
    and put in the object store, by cache file: a task on a node whose cache lacks them saves them there
    instead of embedding the pool again, which would take minutes of the CPU the model's server needs. Only
    for the default pipeline: it is the one that opens the example pool."""
    from kifqa.pipeline.warmup import pool_embeddings

    if settings.examples.mode == "fixed":
        return ()
    return tuple((name, ray.put(matrix)) for name, matrix in pool_embeddings(settings).items())


def _run_shards(settings: Settings, out: str, todo: list[Shard], pools: Pools,
                pipeline: PipelineFactory, progress: bool, *, own_pools: bool) -> RunMeasures:
    """Runs the shard tasks on ``pools``; the first ones are sent before the pools are ready (``own_pools``:
    this job started them, and its startup is the time they took)."""
    b = settings.batch
    run = RunMeasures(llm_actors=len(pools.llm_actors), kb_actors=len(pools.kb_actors))
    # On the driver's node: the job lives as long as that node does, whichever node is lost.
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    counter = Progress.options(scheduling_strategy=here).remote()  # type: ignore[attr-defined]  # mypy ignores @ray.remote
    ctx = TaskContext(job=uuid.uuid4().hex, settings=settings, out=out, kb=pools.kb,
                      open_kb=pools.open_kb, llm=pools.llm, pipeline=pipeline, progress=counter, ready=pools.ready,
                      pool_embeddings=_shipped_pools(settings) if pipeline is default_pipeline else ())
    # Spread over the nodes: the tasks' CPU work shares the cluster, and a lost node takes only its share
    # (Ray reruns them elsewhere; the run folder is wherever ``out`` is, never a node's own disk).
    task = ray.remote(run_shard).options(num_cpus=0, max_retries=b.task_max_retries, scheduling_strategy="SPREAD")
    max_tasks = b.max_task_count(cpus=cluster_cpus())
    queue = deque(todo)
    pending: dict[ObjectRef[Any], int] = {}

    def send() -> None:
        while queue and len(pending) < max_tasks:
            shard = queue.popleft()
            pending[task.remote(shard, ctx)] = shard.index

    send()  # the first tasks open their pipelines while the models load
    waited = pools.wait()
    run.startup_s = waited if own_pools else 0.0
    busy, kb, blocks = pools.llm_busy_seconds(), pools.kb_stats(), pools.blocks()
    start = time.perf_counter()
    total = sum(len(s.rows) if s.redo is None else len(s.redo) for s in todo)
    with tqdm(total=total, unit="q", desc="questions", disable=not progress, smoothing=0.05) as bar:
        next_look = time.perf_counter() + _LOOK_S
        while queue or pending:
            send()
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                index = pending.pop(ref)
                try:
                    done = ray.get(ref)
                    run.questions += done.questions
                    run.task_cpu_s += done.cpu_s
                    run.kb_calls += done.kb_calls
                    run.kb_cache_hits += done.kb_cache_hits
                except RayError as err:
                    log.error("shard %d failed: %s", index, _reason(err))
                    run.failed.append(index)
            answered = min(ray.get(counter.done.remote()), total)
            bar.update(answered - bar.n)
            if progress and time.perf_counter() >= next_look:
                down = pools.open_circuits()
                for label, seconds in ray.get(counter.open_circuits.remote()).items():
                    down[label] = max(down.get(label, 0.0), seconds)
                bar.set_postfix_str(down_line(down), refresh=False)
                next_look = time.perf_counter() + _LOOK_S
            if answered and not run.first_answer_at:  # not bar.n: a disabled bar (--no-progress) counts nothing
                run.first_answer_at = time.perf_counter()
    run.seconds = time.perf_counter() - start
    run.llm_busy_s = pools.llm_busy_seconds() - busy
    run.blocks = pools.blocks() - blocks
    kb_now = pools.kb_stats()
    run.kb_calls += kb_now.calls - kb.calls
    run.kb_cache_hits += kb_now.cache_hits - kb.cache_hits
    ray.kill(counter)
    run.failed.sort()
    return run


def down_line(down: dict[str, float]) -> str:
    """What the progress line says of the endpoints whose circuit is open (``""``: none)."""
    return "; ".join(f"{label} down for {seconds:.0f} s" for label, seconds in sorted(down.items()))


def _reason(err: RayError) -> str:
    """One line on why a task failed: the task's own exception, or what happened to its worker."""
    cause = err.cause if isinstance(err, RayTaskError) else err
    first_line = str(cause).partition("\n")[0]
    return f"{type(cause).__name__}: {first_line}"
