"""Few-shot examples for the draft step: a fixed set, or the k most similar questions of a pool
(the clustered blocks are in :mod:`kifqa.examples.clustered`; :func:`kifqa.examples.open_examples` picks one)."""

from __future__ import annotations

import abc
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from kifqa.data.pool import Example
from kifqa.examples.embeddings import EmbeddedPool
from kifqa.examples.pool import Pool, as_pool
from kifqa.examples.priors import PoolPriors, pool_priors


class ExampleSource(abc.ABC):
    """Chooses the few-shot examples shown for a question."""

    @abc.abstractmethod
    def select(self, question: str) -> list[Example]:
        """The examples for ``question``, least similar first (the closest sits next to it)."""

    #: The pool the examples are drawn from: its name, language and content hash.
    origin: Pool
    #: The embedded example pool, for the sources that choose by sentence embeddings.
    pool: EmbeddedPool | None = None
    _priors: PoolPriors | None = None

    @property
    def english(self) -> bool:
        """Whether the pool's questions are in English: the rules written for English fire only then."""
        return self.origin.language == "en"

    def drawn(self) -> list[Example]:
        """The examples this source draws from: its pool."""
        return self.pool.examples if self.pool is not None else []

    def priors(self) -> PoolPriors:
        """What the examples this source draws from say of the dataset conventions some rules are written for
        (:mod:`kifqa.examples.priors`; under a second for the 19,481 training questions), worked out once."""
        if self._priors is None:
            self._priors = pool_priors(self.drawn())
        return self._priors

    def prepare(self, questions: list[str]) -> None:
        """Computes at once what selecting examples for ``questions`` needs (their embeddings, in one
        encoder batch), before they are answered one by one."""
        if self.pool is not None:
            self.pool.embed_many(questions)

    def prefix_key(self, question: str) -> str | None:
        """Names the few-shot block ``question`` gets: questions with the same key send prompts that
        share that block as a prefix, so answering them one after another on one model instance lets
        its prefix cache serve the block. ``None``: the examples are the question's own."""
        return None

    def shared(self, question: str) -> int:
        """How many of the leading examples :meth:`select` gives ``question`` are the shared block
        :meth:`prefix_key` names (0 when none is)."""
        return len(self.select(question)) if self.prefix_key(question) is not None else 0

    def shared_blocks(self) -> dict[str, list[Example]]:
        """Every shared block by its :meth:`prefix_key` (to compute their model states ahead of time)."""
        return {}


class FixedExamples(ExampleSource):
    """The same hand-written examples for every question."""

    def __init__(self, examples: list[Example] | None = None) -> None:
        self.examples = examples if examples is not None else load_fixed_examples()
        self.origin = Pool("fixed", tuple(self.examples))

    def select(self, question: str) -> list[Example]:
        return list(self.examples)

    def drawn(self) -> list[Example]:
        return list(self.examples)

    def prefix_key(self, question: str) -> str | None:
        return "fixed"

    def shared_blocks(self) -> dict[str, list[Example]]:
        return {"fixed": list(self.examples)}


def load_fixed_examples() -> list[Example]:
    text = resources.files("kifqa.examples").joinpath("fixed_examples.jsonl").read_text()
    return [Example(**json.loads(line)) for line in text.splitlines() if line.strip()]


class RetrievedExamples(ExampleSource):
    """The ``k`` pool examples whose questions are closest to the question (sentence embeddings).

    A pool example whose question is the question itself is never shown (see :class:`EmbeddedPool`).
    """

    pool: EmbeddedPool

    def __init__(self, pool: Pool | Sequence[Example], *, k: int = 5, cache_dir: Path | None = None) -> None:
        self.origin = as_pool(pool)
        self.pool = EmbeddedPool(list(self.origin.examples), cache_dir=cache_dir)
        self.k = k

    def select(self, question: str) -> list[Example]:
        return self.pool.nearest(question, self.k)[::-1]
