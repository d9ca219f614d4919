"""``kifqa bench llm``: what llama.cpp's prefix cache saves on a few-shot prompt, measured in one run.

Several questions share one 5-shot prefix (a system prompt and five question → triple examples,
about 500 tokens); each is answered with grammar-constrained decoding by the local backend, once
with ``cache_prompt`` off and once on. Requests run one at a time after one warm-up request, so
the figures are per-request speeds of one single-threaded instance. Wall-clock speeds drop when
other processes share the cores, so CPU seconds per question are printed too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import click

from kifqa.config import Settings
from kifqa.llm.base import ChatRequest, Completion, Message
from kifqa.llm.local import LocalLLM

SYSTEM = """\
You translate a natural-language question into a triple pattern over a knowledge graph such as \
Wikidata. A triple pattern has the form (subject | predicate | object). Exactly one position is \
the unknown ?x, the thing the question asks for; the other two are written in plain words.

Rules:
1. The subject or the object is the entity named in the question. Copy its name exactly as the \
question writes it, in lower case, without articles.
2. The predicate is the relation the question asks about, named like a Wikidata property label: \
place of birth, date of birth, country of citizenship, director, author, genre, capital, \
located in the administrative territorial entity, performer, occupation, instance of.
3. When the question asks for a value of the named entity (where was X born, who directed X), \
the entity is the subject and ?x is the object: (x | place of birth | ?x).
4. When the question asks for something that has the relation to the named entity (a film \
directed by X, a person born in Y), ?x is the subject: (?x | director | x).
5. A question about a date asks for a value: (ada lovelace | date of birth | ?x). A question \
about a kind or type asks for the class: (rhine | instance of | ?x).
6. Prefer the most specific property: a city in a country is (lyon | country | ?x), while a \
building in a city is (prado | located in the administrative territorial entity | ?x).
7. Answer with the triple pattern only, on one line, with no explanation and no quotes."""

EXAMPLES = (
    ("where was james brown born", "(james brown | place of birth | ?x)"),
    ("name a film that ang lee directed", "(?x | director | ang lee)"),
    ("what is the nationality of kim jong-un", "(kim jong-un | country of citizenship | ?x)"),
    ("who is a person born in paris", "(?x | place of birth | paris)"),
    ("what genre is the album thriller", "(thriller | genre | ?x)"),
)

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

#: The draft line: (known | predicate | ?x) or (?x | predicate | known).
GRAMMAR = r"""root ::= "(" words " | " words " | ?x)" | "(?x | " words " | " words ")"
words ::= [a-z0-9] [a-z0-9 .'-]{0,40}"""


def request(question: str) -> ChatRequest:
    """The 5-shot request for ``question`` (everything before its last message is shared)."""
    messages = [Message("system", SYSTEM)]
    for q, a in EXAMPLES:
        messages += [Message("user", q), Message("assistant", a)]
    messages.append(Message("user", question))
    return ChatRequest(messages=tuple(messages), grammar=GRAMMAR, max_tokens=32)


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


async def measure(llm: LocalLLM, questions: Sequence[str]) -> Run:
    """Answers a warm-up question, then ``questions`` one at a time; fails on any error."""
    completions, cpu_s = [], []
    for question in ("who founded the company ibm", *questions):
        cpu_start = time.process_time()
        (completion,) = await llm.agenerate([request(question)])
        cpu_s.append(time.process_time() - cpu_start)
        if not completion.ok:
            raise click.ClickException(f"{question!r}: {completion.error}")
        completions.append(completion)
    return Run(completions[1:], cpu_s[1:])


async def _bench(settings: Settings, model: str, questions: Sequence[str], threads: int) -> dict[bool, Run]:
    """Both passes, each on a freshly loaded model: ``False`` (no prefix cache), then ``True``."""
    runs = {}
    for cache_prompt in (False, True):
        llm = LocalLLM(model=model, cache_dir=settings.cache_dir, threads=threads, cache_prompt=cache_prompt)
        try:
            await asyncio.to_thread(llm.load)
            runs[cache_prompt] = await measure(llm, questions)
        finally:
            await llm.aclose()
    return runs


@click.command("llm")
@click.option("--model", default=None, help="Model name or .gguf path (default: the configured one).")
@click.option("--questions", "count", default=6, show_default=True, type=click.IntRange(1, len(QUESTIONS)))
@click.option("--threads", default=None, type=click.IntRange(1), help="CPU threads (default: llm.threads).")
def llm(model: str | None, count: int, threads: int | None) -> None:
    """Prompt and generation tokens/s of the local backend without and with prefix caching."""
    settings = Settings.load()
    model = model or settings.llm.model
    threads = threads or settings.llm.threads
    runs = asyncio.run(_bench(settings, model, QUESTIONS[:count], threads))
    off, on = runs[False], runs[True]
    tokens = off.prompt_tokens // len(off.completions)
    click.echo(f"model {model}: llama.cpp, {threads} thread(s), 1 slot; 5-shot prompt of ~{tokens} tokens, "
               f"{count} questions sharing it, one at a time after a warm-up")
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
