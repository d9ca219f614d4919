"""KIF-QA: question → draft → entities → relations → filters → answers, with a trace.

Each step lives in its own module (:mod:`.draft`, :mod:`.entities`, :mod:`.relations`,
:mod:`.answers`); :class:`Pipeline` runs them for one question and never raises: a question that
cannot be answered gets an empty answer and a trace that says which step failed and why.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from kifqa.config import PipelineSettings, Settings
from kifqa.data.text import words
from kifqa.kb.base import KnowledgeBase
from kifqa.llm.base import LLM
from kifqa.types import Question, Result, Trace
from kifqa.pipeline import answers, draft, entities, relations
from kifqa.pipeline.clustered import ClusteredExamples
from kifqa.data.pool import sqwd_pool
from kifqa.pipeline.examples import ExampleSource, FixedExamples, RetrievedExamples
from kifqa.pipeline.recorder import CountingKB, Recorder


def open_examples(settings: Settings) -> ExampleSource:
    """The example source ``settings.examples`` names."""
    ex = settings.examples
    if ex.mode == "fixed":
        return FixedExamples()
    pool = sqwd_pool(settings.data_dir, limit=ex.pool_limit)
    cache_dir = settings.cache_dir / "examples"
    if ex.mode == "retrieved":
        return RetrievedExamples(pool, k=ex.k, cache_dir=cache_dir)
    return ClusteredExamples(pool, clusters=ex.clusters, block=ex.block, nearest=ex.nearest, cache_dir=cache_dir)


class StepError(Exception):
    """A step found nothing to go on with (the message says what)."""


class Pipeline:
    """Answers questions over one knowledge base with one model.

    Args:
        kb: The knowledge base (in-process, or an actor-backed proxy of the same interface).
        llm: The model (likewise).
        examples: Few-shot examples for the draft; the fixed set by default.
        settings: Limits and switches of the steps.
    """

    def __init__(self, *, kb: KnowledgeBase, llm: LLM, examples: ExampleSource | None = None,
                 settings: PipelineSettings | None = None, drafts: Mapping[str, str] | None = None) -> None:
        self.kb = kb
        self.llm = llm
        self.examples = examples or FixedExamples()
        self.settings = settings or PipelineSettings()
        #: Drafts given instead of the model's, by question id (the oracle-draft diagnostic).
        self.drafts = drafts or {}

    def with_drafts(self, drafts: Mapping[str, str]) -> Pipeline:
        """The same pipeline, with ``drafts`` (question id → draft text) given instead of the model's."""
        return Pipeline(kb=self.kb, llm=self.llm, examples=self.examples, settings=self.settings, drafts=drafts)

    @classmethod
    def from_settings(cls, *, kb: KnowledgeBase, llm: LLM, settings: Settings,
                      examples: ExampleSource | None = None) -> Pipeline:
        """The pipeline ``settings`` describe, over ``kb`` and ``llm`` (examples as configured
        unless given)."""
        return cls(kb=kb, llm=llm, examples=examples or open_examples(settings), settings=settings.pipeline)

    def prefix_groups(self, questions: list[Question]) -> list[list[Question]]:
        """``questions`` grouped by few-shot block (each group in the place of its first question,
        input order within it; a question without a shared block is a group of its own)."""
        groups: dict[object, list[Question]] = {}
        self.examples.prepare([q.text for q in questions])
        for i, q in enumerate(questions):
            groups.setdefault(self.examples.prefix_key(q.text) or (None, i), []).append(q)
        return list(groups.values())

    def in_prefix_order(self, questions: list[Question]) -> list[Question]:
        """``questions`` reordered so that those sharing a few-shot block follow one another: answered
        in this order on one model instance, a block is evaluated once and then served by the prefix
        cache."""
        return [q for group in self.prefix_groups(questions) for q in group]

    async def answer(self, question: Question | str) -> Result:
        """The answers and trace of ``question``; never raises (errors land in the trace)."""
        if isinstance(question, str):
            question = Question(id="q0", text=question)
        trace = Trace(question.id, question.text, kb=self.kb.spec, model=self.llm.identity)
        recorder = Recorder(trace)
        start = time.perf_counter()
        found = []
        try:
            found = await self._run(question, recorder)
        except Exception as err:  # noqa: BLE001 - every failure becomes the trace's error
            trace.error = str(err) or type(err).__name__
            if not isinstance(err, (StepError, draft.DraftError)):
                trace.error = f"{type(err).__name__}: {trace.error}"
            trace.error_step = recorder.current_step
        trace.timings["total"] = round(time.perf_counter() - start, 6)
        trace.n_answers = len(found)
        return Result(question, found, trace)

    async def _run(self, question: Question, rec: Recorder) -> list:
        trace, s = rec.trace, self.settings
        kb = CountingKB(self.kb, trace)
        with rec.step("input"):
            if question.error:
                raise StepError(question.error)
            if len(question.text) > s.max_question_chars:
                raise StepError(f"question too long ({len(question.text)} characters; "
                                f"limit {s.max_question_chars})")
            if not words(question.text):
                raise StepError("question has no words")

        with rec.step("draft"):
            text = self.drafts.get(question.id)
            if text is not None:
                trace.notes.append("draft given (oracle), no model call")
            else:
                shots = self.examples.select(question.text)
                trace.examples = [e.question for e in shots]
                out = await rec.generate(self.llm, draft.request(
                    question.text, shots, constrain=s.constrain_draft,
                    prefix_key=self.examples.prefix_key(question.text),
                    shared=self.examples.shared(question.text)))
                if out.error:
                    raise StepError(f"model call failed: {out.error}")
                text = out.text
            trace.draft_output = text
            patterns = draft.parse(text)
            trace.draft = patterns
            main = patterns[0]

        with rec.step("entities"):
            linking = await entities.link(kb, main.known, limit=s.search_limit,
                                          max_kept=s.max_entities, max_near=s.max_near_entities)
            trace.candidates = linking.candidates
            if not linking.kept:
                raise StepError(f"no entity found for {main.known!r}")
            trace.entities = [c.id for c in linking.kept]

        with rec.step("relations"):
            by_entity = await relations.uses(kb, linking.kept)
            ranked = relations.options(main, linking, by_entity)
            if not ranked:
                raise StepError(f"no statements about {', '.join(trace.entities)}")
            trace.options = [r for o in ranked for r in o.relations()]
            chosen = relations.obvious(ranked)
            if chosen is None:
                shown = ranked[: s.max_options]
                out = await rec.generate(self.llm, relations.request(question.text, main, shown))
                if out.error:
                    raise StepError(f"model call failed: {out.error}")
                chosen = relations.parse(out.text, shown)
            trace.relations = chosen.relations()

        with rec.step("answers"):
            found, trace.filters = await answers.run_filters(kb, trace.relations)
            for constraint in patterns[1:]:
                found = await answers.constrain(kb, found, constraint, trace.notes)
        return found
