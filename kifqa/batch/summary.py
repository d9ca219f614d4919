"""The closing summary of a job: counts over all its trace rows, rates over this run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel

from kifqa.llm.blockstate import BlockStats
from kifqa.runs.folder import RunFolder

#: The trace columns the summary reads.
COLUMNS = ["error", "error_step", "n_answers", "llm_calls", "prompt_tokens", "completion_tokens", "kb_calls"]


class Summary(BaseModel):
    """What a job produced (all finished shards in its folder) and how fast this run went."""

    out: str
    questions: int
    answered: int
    empty: int
    errors: int
    input_errors: int
    answers: int
    #: Questions run by this invocation (the rest were finished by earlier runs).
    ran: int
    shards: int
    shards_skipped: int
    shards_failed: list[int]
    #: Seconds to start the actors (models loaded), then to run the questions.
    startup_s: float
    seconds: float
    #: Seconds from the job's start (actors included) to its first answered question; 0 if none ran.
    first_answer_s: float = 0.0
    #: LLM and KB actors this run used (``auto`` resolved).
    llm_actors: int = 0
    kb_actors: int = 0
    #: CPU seconds the shard tasks' worker processes spent in this run.
    task_cpu_s: float = 0.0
    questions_per_s: float
    llm_calls_per_question: float
    prompt_tokens_per_question: float
    completion_tokens_per_question: float
    kb_calls_per_question: float
    #: Share of this run's KB calls answered by the on-disk cache.
    kb_cache_hit_rate: float
    #: Share of this run's wall time (times the number of LLM actors) with model calls in flight.
    llm_busy_share: float
    #: Few-shot block states the LLM actors restored from ``cache_dir/kv`` (and their mean milliseconds),
    #: computed and saved (and their seconds in all), or refused as stale or corrupt, in this run.
    blocks_restored: int = 0
    block_restore_ms: float = 0.0
    blocks_computed: int = 0
    block_compute_s: float = 0.0
    blocks_refused: int = 0

    @property
    def ok(self) -> bool:
        return not self.shards_failed

    def render(self) -> str:
        lines = [
            f"questions {self.questions}: {self.answered} answered, {self.empty} empty, "
            f"{self.errors} errors ({self.input_errors} bad input); {self.answers} answer rows",
            f"this run  {self.ran} questions in {self.seconds:.1f} s ({self.questions_per_s:.2f} questions/s; "
            f"startup {self.startup_s:.1f} s, first answer after {self.first_answer_s:.1f} s); "
            f"{self.shards_skipped} of {self.shards} shards already done",
            f"per q     {self.llm_calls_per_question:.2f} LLM calls, {self.prompt_tokens_per_question:.0f} prompt + "
            f"{self.completion_tokens_per_question:.0f} completion tokens, {self.kb_calls_per_question:.2f} KB calls",
            f"actors    {self.llm_actors} LLM, {self.kb_actors} KB; LLM busy {self.llm_busy_share:.0%} of the run; "
            f"KB cache hits {self.kb_cache_hit_rate:.0%}",
            f"output    {self.out}",
        ]
        if self.blocks_restored or self.blocks_computed or self.blocks_refused:
            lines.insert(-1, f"blocks    {self.blocks_restored} restored ({self.block_restore_ms:.0f} ms each), "
                             f"{self.blocks_computed} computed ({self.block_compute_s:.1f} s), "
                             f"{self.blocks_refused} refused")
        if self.shards_failed:
            lines.append(f"FAILED    shards {self.shards_failed} (rerun to finish them)")
        return "\n".join(lines)


@dataclass
class RunMeasures:
    """What running the shards of this invocation measured."""

    questions: int = 0
    failed: list[int] = field(default_factory=list)
    startup_s: float = 0.0
    seconds: float = 0.0
    llm_busy_s: float = 0.0
    task_cpu_s: float = 0.0
    kb_calls: int = 0
    kb_cache_hits: int = 0
    #: perf_counter() when the first question was answered (0: none yet).
    first_answer_at: float = 0.0
    llm_actors: int = 0
    kb_actors: int = 0
    blocks: BlockStats = field(default_factory=BlockStats)


def job_summary(output: RunFolder, run: RunMeasures, *, n_shards: int, n_todo: int, started: float) -> Summary:
    """The summary of the job in ``output`` after this run (``run``; ``n_todo`` of its ``n_shards`` shards to do,
    begun at ``started``, :func:`time.perf_counter`)."""
    return Summary(
        out=output.uri, **trace_counts(output.trace_shards(COLUMNS)),
        answers=output.count_answers(), ran=run.questions, shards=n_shards,
        shards_skipped=n_shards - n_todo, shards_failed=run.failed, startup_s=round(run.startup_s, 3),
        seconds=round(run.seconds, 3), task_cpu_s=round(run.task_cpu_s, 3),
        questions_per_s=run.questions / run.seconds if run.seconds else 0.0,
        kb_cache_hit_rate=run.kb_cache_hits / run.kb_calls if run.kb_calls else 0.0,
        first_answer_s=round(run.first_answer_at - started, 3) if run.first_answer_at else 0.0,
        llm_actors=run.llm_actors, kb_actors=run.kb_actors, blocks_restored=run.blocks.restored,
        blocks_computed=run.blocks.computed, blocks_refused=run.blocks.refused,
        block_restore_ms=round(1000 * run.blocks.restore_s / run.blocks.restored, 1) if run.blocks.restored else 0.0,
        block_compute_s=round(run.blocks.compute_s, 3),
        llm_busy_share=run.llm_busy_s / (run.llm_actors * run.seconds) if run.seconds and run.llm_actors else 0.0)


def trace_counts(shards: Iterable[pa.Table]) -> dict[str, Any]:
    """Question counts and per-question means over trace rows with :data:`COLUMNS`, one shard's table at
    a time (the driver of a large job holds no more than one)."""
    sums = dict.fromkeys(("questions", "answered", "empty", "errors", "input_errors", *_MEANS), 0)
    for traces in shards:
        failed = pc.is_valid(traces["error"])
        ok = pc.invert(failed)
        has_answers = pc.greater(traces["n_answers"], 0)
        sums["questions"] += traces.num_rows
        sums["answered"] += _count(pc.and_(ok, has_answers))
        sums["empty"] += _count(pc.and_(ok, pc.invert(has_answers)))
        sums["errors"] += _count(failed)
        sums["input_errors"] += _count(pc.fill_null(pc.equal(traces["error_step"], "input"), False))
        for column in _MEANS:
            sums[column] += pc.sum(traces[column]).as_py() or 0
    n = sums["questions"]
    return {k: v for k, v in sums.items() if k not in _MEANS} | {
        f"{column}_per_question": sums[column] / n if n else 0.0 for column in _MEANS}


#: The trace columns the summary gives per-question means of.
_MEANS = ("llm_calls", "prompt_tokens", "completion_tokens", "kb_calls")


def _count(mask: pa.ChunkedArray) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)
