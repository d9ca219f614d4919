"""``kifqa bench llm``: what llama.cpp's prefix cache saves on the pipeline's draft prompts, in one run.

Several questions are drafted with the prompts the pipeline sends (the configured examples, the draft
grammar), in the pipeline's order (questions sharing a few-shot block together), by the local
backend, once with ``cache_prompt`` off and once on. Requests run one at a time after one warm-up
request, so the figures are per-request speeds of one single-threaded instance. Wall-clock speeds
drop when other processes share the cores, so CPU seconds per question are printed too. With
``--slots 1,4,8`` it then sends ``--slot-requests`` draft requests at once (SimpleQuestions-Wikidata
valid questions 100 on, tuning questions) to an instance with each number of llama.cpp slots, decoding
that many at once (each slot first given a warm-up request, so it holds the shared prefix), and prints
seconds per request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import click

from kifqa.config import Settings
from kifqa.llm.base import ChatRequest, Completion
from kifqa.llm.local import LocalLLM

QUESTIONS = (
    "who wrote the novel dracula",
    "what is the capital of australia",
    "which country is the city of porto in",
    "name a song performed by adele",
    "what is the occupation of marie curie",
    "when was alan turing born",
    "who directed the film alien",
    "what kind of thing is the danube",
    "which city is the louvre located in",
    "name a person whose occupation is astronaut",
)


def draft_requests(settings: Settings, questions: Sequence[str]) -> list[ChatRequest]:
    """The draft requests the pipeline sends for ``questions`` with the configured examples, in the
    order it would send them (questions sharing a few-shot block one after another)."""
    from kifqa.examples import open_examples
    from kifqa.pipeline import draft

    examples = open_examples(settings.examples, data_dir=settings.data_dir, cache_dir=settings.cache_dir,
                           kb_spec=settings.kb.spec)
    order = sorted(range(len(questions)), key=lambda i: (examples.prefix_key(questions[i]) or "", i))
    return [draft.request(questions[i], examples.select(questions[i]), constrain=settings.pipeline.constrain_draft,
                          prefix_key=examples.prefix_key(questions[i])) for i in order]


@dataclass(frozen=True)
class Run:
    """The measured requests of one mode (the warm-up excluded)."""

    completions: list[Completion]
    #: CPU seconds this process spent on each request (unlike wall time, not inflated when other
    #: processes compete for the cores).
    cpu_s: list[float]

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens of the measured requests."""
        return sum(c.usage.prompt_tokens for c in self.completions)

    @property
    def cached_tokens(self) -> int:
        """Of those, the ones served from the prefix cache."""
        return sum(c.usage.cached_prompt_tokens for c in self.completions)

    @property
    def prompt_tps(self) -> float:
        """Prompt tokens per second of prompt time, cached tokens counted as served."""
        return self.prompt_tokens / max(sum(c.usage.prompt_s for c in self.completions), 1e-9)

    @property
    def evaluated_tps(self) -> float:
        """Prompt tokens actually evaluated per second (the raw prompt speed)."""
        evaluated = self.prompt_tokens - self.cached_tokens
        return evaluated / max(sum(c.usage.prompt_s for c in self.completions), 1e-9)

    @property
    def generation_tps(self) -> float:
        """Generated tokens per second of generation time."""
        return sum(c.usage.completion_tokens for c in self.completions) / max(
            sum(c.usage.generation_s for c in self.completions), 1e-9
        )

    @property
    def seconds_per_question(self) -> float:
        """Mean request latency."""
        return sum(c.usage.latency_s for c in self.completions) / len(self.completions)

    @property
    def cpu_seconds_per_question(self) -> float:
        """Mean CPU time per request."""
        return sum(self.cpu_s) / len(self.cpu_s)


#: Answered first, unmeasured: loads the model and evaluates the shared system prompt.
WARM_UP = "who founded the company ibm"


async def measure(llm: LocalLLM, requests: Sequence[ChatRequest]) -> Run:
    """Sends the first request (the warm-up), then the others one at a time; fails on any error."""
    completions, cpu_s = [], []
    for request in requests:
        cpu_start = time.process_time()
        (completion,) = await llm.agenerate([request])
        cpu_s.append(time.process_time() - cpu_start)
        if not completion.ok:
            raise click.ClickException(f"{request.messages[-1].content!r}: {completion.error}")
        completions.append(completion)
    return Run(completions[1:], cpu_s[1:])


async def _bench(settings: Settings, model: str, requests: Sequence[ChatRequest], threads: int) -> dict[bool, Run]:
    """Both passes, each on a freshly loaded model: ``False`` (no prefix cache), then ``True``."""
    runs = {}
    for cache_prompt in (False, True):
        llm = LocalLLM(model=model, cache_dir=settings.cache_dir, threads=threads, parallel=1,
                       cache_prompt=cache_prompt)
        try:
            await asyncio.to_thread(llm.load)
            runs[cache_prompt] = await measure(llm, requests)
        finally:
            await llm.aclose()
    return runs


async def per_slots(settings: Settings, model: str, requests: Sequence[ChatRequest], threads: int,
                    slots: Sequence[int]) -> dict[int, float]:
    """Wall seconds per request with each number of slots, all ``requests`` sent at once after
    every slot has answered a warm-up request (so each holds the shared prefix)."""
    warm_up, *measured = requests
    out = {}
    for n in slots:
        llm = LocalLLM(model=model, cache_dir=settings.cache_dir, threads=threads, parallel=n, decoding=n)
        try:
            await asyncio.to_thread(llm.load)
            await llm.agenerate([warm_up] * n)
            start = time.perf_counter()
            done = await llm.agenerate(measured)
            out[n] = (time.perf_counter() - start) / len(measured)
        finally:
            await llm.aclose()
        if failed := [c.error for c in done if not c.ok]:
            raise click.ClickException(f"{n} slots: {failed[0]}")
    return out


@click.command("llm")
@click.option("--model", default=None, help="Model name or .gguf path (default: the configured one).")
@click.option("--questions", "count", default=6, show_default=True, type=click.IntRange(1, len(QUESTIONS)))
@click.option("--threads", default=None, type=click.IntRange(1), help="CPU threads (default: llm.threads).")
@click.option("--examples", type=click.Choice(["clustered", "retrieved", "fixed"]),
              help="Few-shot examples of the draft prompt (default: examples.mode).")
@click.option("--slots", default=None, help="Also compare these slot counts (e.g. 1,4,8), all requests at once.")
@click.option("--slot-requests", default=24, show_default=True, type=click.IntRange(1, 100),
              help="Draft requests sent at once for --slots.")
def llm(model: str | None, count: int, threads: int | None, examples: str | None, slots: str | None,
        slot_requests: int) -> None:
    """Prompt and generation tokens/s of the local backend on the pipeline's draft prompts, without and
    with prefix caching."""
    settings = Settings.load()
    if examples:
        settings = settings.override(examples={"mode": examples})
    model = model or settings.llm.model
    threads = threads or settings.llm.threads
    requests = draft_requests(settings, QUESTIONS[:count])
    runs = asyncio.run(_bench(settings, model, [*draft_requests(settings, [WARM_UP]), *requests], threads))
    off, on = runs[False], runs[True]
    tokens = off.prompt_tokens // len(off.completions)
    blocks = len({r.prefix_key for r in requests}) if all(r.prefix_key for r in requests) else count
    click.echo(f"model {model}: llama.cpp, {threads} thread(s), 1 slot; the pipeline's draft prompts with "
               f"{settings.examples.mode} examples, ~{tokens} tokens, {count} questions over {blocks} example "
               "block(s), one at a time after a warm-up")
    click.echo(f"{'':18}{'prompt tok/s':>14}{'evaluated tok/s':>17}{'gen tok/s':>11}{'cached':>9}"
               f"{'s/question':>12}{'CPU s/question':>16}")
    for name, run in (("no prefix cache", off), ("prefix cache", on)):
        cached = f"{run.cached_tokens / max(run.prompt_tokens, 1):.0%}"
        click.echo(f"{name:18}{run.prompt_tps:14.1f}{run.evaluated_tps:17.1f}{run.generation_tps:11.1f}"
                   f"{cached:>9}{run.seconds_per_question:12.2f}{run.cpu_seconds_per_question:16.2f}")
    click.echo(f"{'ratio (on/off)':18}{on.prompt_tps / off.prompt_tps:13.1f}x{'':17}"
               f"{on.generation_tps / off.generation_tps:10.2f}x{'':9}"
               f"{off.seconds_per_question / on.seconds_per_question:11.1f}x"
               f"{off.cpu_seconds_per_question / on.cpu_seconds_per_question:15.1f}x")
    click.echo("(wall-clock speeds drop when other processes share the cores; CPU s/question does not)")
    if slots:
        counts = [int(n) for n in slots.split(",")]
        from kifqa.eval.datasets import load_gold

        asked = [q.text for q in load_gold("sqwd:valid", settings.data_dir, limit=slot_requests, start=100)]
        measured = [*draft_requests(settings, [WARM_UP]), *draft_requests(settings, asked)]
        by_slots = asyncio.run(per_slots(settings, model, measured, threads, counts))
        click.echo(f"{len(asked)} draft requests at once (valid questions 100-{99 + len(asked)}), every slot warm:")
        for n, seconds in by_slots.items():
            click.echo(f"{n:3d} slot(s) {seconds:8.2f} s/request {by_slots[counts[0]] / seconds:6.2f}x")
