"""What every step of one question's run reads, and the error a step raises when it cannot go on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kifqa.kb.shape import shape
from kifqa.types import Convention, ErrorKind

if TYPE_CHECKING:  # annotations only: the steps that import this module need none of these at import
    from kifqa.config import PipelineSettings
    from kifqa.examples.precedents import Precedents, Votes
    from kifqa.examples.priors import PoolPriors
    from kifqa.examples.sources import ExampleSource
    from kifqa.examples.vectors import SavedVectors
    from kifqa.kb.base import KnowledgeBase
    from kifqa.llm.base import LLM
    from kifqa.pipeline.recorder import Recorder


class StepError(Exception):
    """A step found nothing to go on with, or could not go on: ``kind`` says which, the message what."""

    def __init__(self, message: str, *, kind: ErrorKind) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Context:
    """One question and what its steps use: the base (its calls counted in the trace), the model, the few-shot
    examples, the settings, the pool's precedent votes (opened on first use: embedding the pool is costly) and
    the pool's priors."""

    question: str
    kb: KnowledgeBase
    llm: LLM
    examples: ExampleSource
    settings: PipelineSettings
    recorder: Recorder
    vectors: SavedVectors | None
    precedents: Callable[[], Precedents | None]
    priors: PoolPriors

    @property
    def english(self) -> bool:
        """Whether the pool's questions are English: the rules written for English words (plurals, the question
        words that ask for dates and quantities) fire only then."""
        return self.examples.english

    @property
    def wikidata_shaped(self) -> bool:
        """Whether the base follows Wikidata's data model (:func:`kifqa.kb.shape.shape`): the rules written for its
        properties (a kind drafted as ``occupation`` or ``instance of``, :func:`kifqa.pipeline.redraft.kind`) fire
        only then."""
        return shape(self.kb.spec) == "wikidata"

    def follows(self, convention: Convention) -> bool:
        """Whether the example pool bears ``convention`` out enough for its rule to fire
        (:attr:`PipelineSettings.prior_share`, :attr:`PipelineSettings.prior_least`)."""
        s = self.settings
        return self.priors.prior(convention).holds(share=s.prior_share, least=s.prior_least)

    async def votes(self, known: str) -> Votes | None:
        """What the pool's questions nearest to the question, asked about ``known``, ask for
        (:attr:`PipelineSettings.precedent_neighbours` of them); ``None`` without votes."""
        k = self.settings.precedent_neighbours
        precedents = self.precedents() if k else None
        return None if precedents is None else await precedents.of(self.question, known, k)
