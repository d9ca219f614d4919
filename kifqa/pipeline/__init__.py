"""KIF-QA: question → draft → entities → relations → filters → answers, with a trace.

Each step lives in its own module (:mod:`.draft`, :mod:`.entities`, :mod:`.relations`,
:mod:`.answers`); :class:`Pipeline` runs them for one question and never raises: a question that
cannot be answered gets an empty answer and a trace that says which step failed and why.
:mod:`.schedule` answers a question set in the order that lets questions share a few-shot block.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace

from kifqa.config import PipelineSettings, Settings
from kifqa.data.text import words
from kifqa.errors import KBError
from kifqa.examples import open_examples
from kifqa.examples.precedents import Precedents
from kifqa.examples.sources import ExampleSource, FixedExamples
from kifqa.examples.vectors import SavedVectors, memo
from kifqa.kb.base import KnowledgeBase
from kifqa.llm.base import LLM
from kifqa.pipeline import answers, draft, entities, redraft, relations
from kifqa.pipeline.attempt import Attempt
from kifqa.pipeline.context import Context, StepError
from kifqa.pipeline.outcome import Outcome
from kifqa.pipeline.recorder import CountingKB, Recorder
from kifqa.redact import redact
from kifqa.types import Answer, ErrorKind, Question, Result, Trace, clipped

__all__ = ["Pipeline", "StepError", "error_kind"]


def error_kind(err: Exception) -> ErrorKind:
    """The kind of an exception that ended a question's run."""
    if isinstance(err, StepError):
        return err.kind
    if isinstance(err, (draft.DraftError, relations.ChoiceError)):
        return ErrorKind.MODEL_OUTPUT
    return ErrorKind.KB if isinstance(err, KBError) else ErrorKind.INTERNAL


def checked(question: Question, settings: PipelineSettings) -> None:
    """Raises an input error for a question that cannot be asked (unreadable, too long, no words)."""
    if question.error:
        raise StepError(question.error, kind=ErrorKind.INPUT)
    if len(question.text) > settings.max_question_chars:
        raise StepError(f"question too long ({len(question.text)} characters; "
                        f"limit {settings.max_question_chars})", kind=ErrorKind.INPUT)
    if not words(question.text):
        raise StepError("question has no words", kind=ErrorKind.INPUT)


class Pipeline:
    """Answers questions over one knowledge base with one model.

    Args:
        kb: The knowledge base (in-process, or an actor-backed proxy of the same interface).
        llm: The model (likewise).
        examples: Few-shot examples for the draft, and the pool whose priors say which dataset conventions the
            rules follow (:mod:`.priors`); the fixed set by default.
        settings: Limits and switches of the steps.
        oracle_drafts: Drafts given instead of the model's, by question id (the oracle-draft diagnostic).
        vectors: Where the relation ranking keeps the embeddings of properties and predicates between
            runs (none: each process encodes them again).
    """

    def __init__(self, *, kb: KnowledgeBase, llm: LLM, examples: ExampleSource | None = None,
                 settings: PipelineSettings | None = None, oracle_drafts: Mapping[str, str] | None = None,
                 vectors: SavedVectors | None = None) -> None:
        self.kb = kb
        self.llm = llm
        self.examples = examples or FixedExamples()
        self.settings = settings or PipelineSettings()
        self.oracle_drafts = oracle_drafts or {}
        self.vectors = vectors
        #: What similar pool questions ask for (:attr:`PipelineSettings.precedent_neighbours`), opened on first use.
        self._precedents: Precedents | None = None

    def with_oracle_drafts(self, drafts: Mapping[str, str]) -> Pipeline:
        """The same pipeline, with ``drafts`` (question id → draft text) given instead of the model's."""
        return Pipeline(kb=self.kb, llm=self.llm, examples=self.examples, settings=self.settings,
                        oracle_drafts=drafts, vectors=self.vectors)

    @classmethod
    def from_settings(cls, *, kb: KnowledgeBase, llm: LLM, settings: Settings,
                      examples: ExampleSource | None = None) -> Pipeline:
        """The pipeline ``settings`` describe, over ``kb`` and ``llm`` (examples as configured
        unless given)."""
        examples = examples or open_examples(settings.examples, data_dir=settings.data_dir,
                                             cache_dir=settings.cache_dir, kb_spec=kb.spec)
        return cls(kb=kb, llm=llm, examples=examples, settings=settings.pipeline,
                   vectors=SavedVectors(settings.cache_dir / "vectors"))

    def prepare(self, questions: list[Question]) -> None:
        """Embeds ``questions`` in one encoder batch, for choosing their examples and ranking their relation
        options, before they are answered one by one (one at a time costs the encoder 3-4× the CPU), and works out
        the pool's priors (a batch task does this while the models load, not in its first question)."""
        texts = [q.text for q in questions]
        self.examples.prepare(texts)
        if self.settings.rank_relations == "meaning":
            memo().vectors(texts)  # a dict lookup each where the examples have just embedded them
        self.examples.priors()

    async def answer(self, question: Question | str) -> Result:
        """The answers and trace of ``question``; never raises (errors land in the trace)."""
        if isinstance(question, str):
            question = Question(id="q0", text=question)
        trace = Trace(question.id, question.text, kb=redact(self.kb.spec), model=self.llm.identity,
                      pool=self.examples.origin.label)
        recorder = Recorder(trace)
        start = time.perf_counter()
        found = []
        try:
            found = await self._run(question, recorder)
        except Exception as err:  # noqa: BLE001 - every failure becomes the trace's error
            error = str(err) or type(err).__name__
            if not isinstance(err, (StepError, draft.DraftError)):
                error = f"{type(err).__name__}: {error}"
            trace.fail(error_kind(err), error, step=recorder.current_step)
        trace.timings["total"] = round(time.perf_counter() - start, 6)
        trace.n_answers = len(found)
        return Result(question, found, trace)

    def precedents(self) -> Precedents | None:
        """What similar pool questions ask for (none without an embedded pool), embedded on first use."""
        if self._precedents is None and self.examples.pool is not None:
            self._precedents = Precedents(self.examples.pool)
        return self._precedents

    async def _run(self, question: Question, rec: Recorder) -> list[Answer]:
        """The steps for ``question``, in order; the trace is written from what they decided, also where one
        raises."""
        ctx = Context(question.text, CountingKB(self.kb, rec.trace), self.llm, self.examples, self.settings, rec,
                      self.vectors, self.precedents, self.examples.priors())
        with rec.step("input"):
            checked(question, self.settings)
        with rec.step("draft"):
            try:
                outcome = Outcome(Attempt(await draft.first(ctx, oracle=self.oracle_drafts.get(question.id))))
            except draft.DraftError as err:  # no outcome to write: the trace keeps what the model wrote
                rec.trace.draft_output, rec.trace.examples = clipped(err.output), list(err.examples)
                raise
        try:
            first = outcome.first.drafted
            with rec.step("entities"):
                linking = await entities.step(ctx, first.main)
                outcome = replace(outcome, first=Attempt(first, linking))
            with rec.step("relations"):
                outcome = replace(outcome, first=Attempt(first, linking, await relations.step(ctx, first.main,
                                                                                               linking)))
            if why := await redraft.reason(ctx, outcome.first):
                with rec.step("redraft"):
                    outcome = replace(outcome, redraft=await redraft.second(ctx, outcome.first, why))
            taken = outcome.taken
            with rec.step("relations" if taken.linking is not None and taken.linking.kept else "entities"):
                _check(taken)
            with rec.step("relations"):
                choice = await relations.choose(ctx, taken.main, taken.options)
                outcome = replace(outcome, choice=choice)
            with rec.step("answers"):
                outcome = replace(outcome, answered=await answers.step(ctx, choice.option.relations(),
                                                                       taken.drafted.patterns[1:]))
            if outcome.redraft is None or outcome.redraft.taken is None:
                outcome = await self._kind(ctx, outcome)
        finally:
            outcome.write(rec.trace, ctx.priors)
        return list(outcome.answers)

    async def _kind(self, ctx: Context, outcome: Outcome) -> Outcome:
        """``outcome`` with a second draft for its answers where they are a kind (:func:`redraft.kind`)."""
        assert outcome.choice is not None and outcome.answered is not None
        if await redraft.reason(ctx, outcome.first, outcome.answered) is None:
            return outcome
        with ctx.recorder.step("redraft"):
            return replace(outcome, kind=await redraft.kind(ctx, outcome.first, outcome.choice, outcome.answered))


def _check(taken: Attempt) -> None:
    """Raises the error of an attempt that cannot go on to a choice: no entity, or no statement about its
    entities."""
    if taken.linking is None or not taken.linking.kept:
        raise StepError(f"no entity found for {taken.main.known!r}", kind=ErrorKind.NO_ENTITY)
    if not taken.options:
        entities_ = ", ".join(c.id for c in taken.linking.kept)
        raise StepError(f"no statements about {entities_}", kind=ErrorKind.NO_STATEMENTS)
