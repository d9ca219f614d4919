"""``kifqa bench examples``: the example modes side by side on the same gold questions, in one run.

For each mode the whole pipeline answers the questions in-process (as many at a time as the model
has slots, in the mode's prefix order, on a freshly opened model) and is scored as ``kifqa eval``
scores it; with ``--jobs 2`` two modes run at once, each in its own process (one core each). Printed per
mode: macro F1, seconds per question, prompt tokens the model evaluated per question, and the share
of prompt tokens its prefix cache served. With an LLM record cache (``llm.cache``) answers recorded
by an earlier run are replayed: their model time and prefix-cache tokens are then the recorded ones
(the cache keeps them, and they are added as if run one after another), and the table says how
many calls were replayed. With the local backend, a mode with shared few-shot blocks runs twice: cold
(an empty block-state folder: each block is computed on the way and saved) and warm (every block
restored from that folder), as a first and a later run on a machine would.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import click

from kifqa.config import Settings
from kifqa.llm.base import LLM, ChatRequest, Completion
from kifqa.redact import redact

MODES = ("fixed", "retrieved", "clustered")


@dataclass
class Meter:
    """Model cost of the calls one mode made (recorded figures for replayed calls)."""

    calls: int = 0
    replayed: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    model_s: float = 0.0
    #: Model seconds of the calls computed in this run (not replayed).
    fresh_model_s: float = 0.0
    #: Replayed calls whose recorded cost the cache does not hold (recorded before it kept them).
    unrecorded: int = 0

    def add(self, completion: Completion) -> None:
        u = completion.usage
        self.calls += 1
        self.prompt_tokens += u.prompt_tokens
        if not u.cache_hit:
            self.cached_tokens += u.cached_prompt_tokens
            self.model_s += u.latency_s
            self.fresh_model_s += u.latency_s
            return
        self.replayed += 1
        if u.recorded is None:
            self.unrecorded += 1
        else:
            self.cached_tokens += u.recorded.cached_prompt_tokens
            self.model_s += u.recorded.latency_s


class MeteredLLM(LLM):
    """Passes requests to ``llm`` and adds what each answer cost to a :class:`Meter`."""

    def __init__(self, llm: LLM, meter: Meter) -> None:
        self.llm = llm
        self.meter = meter
        self.identity = llm.identity

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        completions = await self.llm.agenerate(requests)
        for c in completions:
            if c.ok:
                self.meter.add(c)
        return completions

    async def aclose(self) -> None:
        await self.llm.aclose()


@dataclass
class ModeRun:
    """One mode's figures."""

    mode: str
    questions: int
    macro_f1: float
    wall_s: float
    cpu_s: float
    meter: Meter = field(default_factory=Meter)
    instances: int = 1

    @property
    def seconds_per_question(self) -> float:
        """Wall time per question, replayed model calls counted at their recorded time."""
        return (self.wall_s - self.meter.fresh_model_s + self.meter.model_s) / self.questions

    @property
    def evaluated_per_question(self) -> float:
        return (self.meter.prompt_tokens - self.meter.cached_tokens) / self.questions

    @property
    def prefix_hit_rate(self) -> float:
        return self.meter.cached_tokens / max(self.meter.prompt_tokens, 1)


async def run_mode(settings: Settings, mode: str, dataset: str, start: int, limit: int | None, *,
                   label: str | None = None, share: int = 1) -> ModeRun:
    """Answers and scores the questions with the examples of ``mode``, on as many model instances as
    ``kifqa eval`` opens (divided among ``share`` modes at once)."""
    from kifqa.api import open_pipeline
    from kifqa.eval.datasets import GoldExtender, load_gold
    from kifqa.eval.sources import evaluate
    from kifqa.kb.spec import open_kb
    from kifqa.llm import open_llm
    from kifqa.llm.factory import in_process_instances

    settings = settings.override(examples={"mode": mode})
    questions = load_gold(dataset, settings.data_dir, limit=limit, start=start)
    meter = Meter()
    kb = open_kb(settings.kb.spec, settings)
    instances = in_process_instances(settings, share=share)
    llm = MeteredLLM(open_llm(settings, instances=instances), meter)
    try:
        async with open_pipeline(settings=settings, kb=kb, llm=llm) as pipeline:
            wall, cpu = time.perf_counter(), time.process_time()
            evaluation = await evaluate(pipeline, questions, GoldExtender(settings.data_dir),
                                        concurrency=settings.llm.in_flight * instances)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        await llm.aclose()
        await kb.aclose()
    f1 = evaluation.metrics()["all"]["macro_f1"]
    return ModeRun(label or mode, len(questions), f1, wall, cpu, meter, instances=instances)


def run_cold_and_warm(settings: Settings, mode: str, dataset: str, start: int, limit: int | None,
                      share: int = 1) -> list[ModeRun]:
    """``mode`` cold then warm (see the module's docstring) when its blocks can be saved, else once
    (each on a loop of its own, for a worker process)."""
    cfg = settings.llm
    if cfg.backend != "local" or not cfg.persist_blocks or mode == "retrieved":
        return [asyncio.run(run_mode(settings, mode, dataset, start, limit, share=share))]
    with tempfile.TemporaryDirectory(prefix="kifqa-blocks-") as folder:
        fresh = settings.override(llm={"block_dir": folder})
        return [asyncio.run(run_mode(fresh, mode, dataset, start, limit, label=f"{mode}:{state}", share=share))
                for state in ("cold", "warm")]


@click.command("examples")
@click.option("--dataset", default="sqwd:valid", show_default=True, help="A gold dataset (as for kifqa eval).")
@click.option("--start", type=click.IntRange(min=0), default=200, show_default=True,
              help="Skip the dataset's first N questions (valid 0-199 were used for tuning).")
@click.option("--limit", type=click.IntRange(min=1), default=500, show_default=True, help="Questions per mode.")
@click.option("--modes", default=",".join(MODES), show_default=True, help="Comma-separated example modes.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A settings file (YAML).")
@click.option("--model", default=None, help="Model name or .gguf path (default: the configured one).")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Modes run at once, each in its own process (2 on two cores: the modes then share the machine).")
def examples(dataset: str, start: int, limit: int, modes: str, config: str | None, model: str | None,
             jobs: int) -> None:
    """Macro F1, seconds and prompt tokens per question and prefix-cache hits of each example mode."""
    settings = Settings.load(config, **({"llm": {"model": model}} if model else {}))
    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    unknown = sorted(set(chosen) - set(MODES))
    if unknown:
        raise click.UsageError(f"unknown modes {unknown}; choose among {', '.join(MODES)}")
    if jobs == 1:
        runs = [r for mode in chosen for r in run_cold_and_warm(settings, mode, dataset, start, limit)]
    else:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            done = pool.map(run_cold_and_warm, *zip(*((settings, m, dataset, start, limit, jobs) for m in chosen)))
            runs = [r for pair in done for r in pair]
    click.echo(render(runs, settings, jobs=jobs))


def render(runs: list[ModeRun], settings: Settings, *, jobs: int = 1) -> str:
    """The side-by-side table and how it was measured."""
    instances = runs[0].instances if runs else 1
    lines = [f"model {settings.llm.model} ({settings.llm.backend}, {instances} instance(s) of "
             f"{settings.llm.threads} thread(s) and {settings.llm.parallel} slot(s)), kb {redact(settings.kb.spec)}, "
             f"{settings.llm.in_flight * instances} question(s) in flight, {jobs} mode(s) at once; load average "
             f"at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
             f"{'mode':16}{'n':>6}{'macro F1':>10}{'s/question':>12}{'CPU s/q':>9}{'evaluated tok/q':>17}"
             f"{'prefix hits':>13}{'calls/q':>9}{'replayed':>10}"]
    for r in runs:
        m = r.meter
        lines.append(f"{r.mode:16}{r.questions:6d}{r.macro_f1:10.3f}{r.seconds_per_question:12.2f}"
                     f"{r.cpu_s / r.questions:9.2f}{r.evaluated_per_question:17.1f}{r.prefix_hit_rate:13.0%}"
                     f"{m.calls / r.questions:9.2f}{m.replayed / max(m.calls, 1):10.0%}")
    if any(r.meter.unrecorded for r in runs):
        lines.append("(some replayed calls have no recorded cost: their model time and prefix hits count as 0)")
    lines.append("s/question: wall time, replayed calls at their recorded model time; CPU s/q: this process's "
                 "CPU time (replayed calls cost none)")
    return "\n".join(lines)
