"""KIF-QA: question → draft → entities → relations → filters → answers, with a trace.

Each step lives in its own module (:mod:`.draft`, :mod:`.entities`, :mod:`.relations`,
:mod:`.answers`); :class:`Pipeline` runs them for one question and never raises: a question that
cannot be answered gets an empty answer and a trace that says which step failed and why.
:mod:`.schedule` answers a question set in the order that lets questions share a few-shot block.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

from kifqa.config import PipelineSettings, Settings
from kifqa.data.pool import sqwd_pool
from kifqa.data.text import name_key, words
from kifqa.errors import KBError
from kifqa.kb.base import KnowledgeBase
from kifqa.llm.base import LLM
from kifqa.pipeline import answers, draft, entities, ranking, relations
from kifqa.pipeline.clustered import ClusteredExamples
from kifqa.pipeline.examples import ExampleSource, FixedExamples, RetrievedExamples
from kifqa.pipeline.recorder import CountingKB, Recorder
from kifqa.pipeline.text import outermost
from kifqa.pipeline.vectors import SavedVectors, memo
from kifqa.redact import redact
from kifqa.sqlite import private_dir
from kifqa.types import (
    Answer,
    Candidate,
    ConstraintOutcome,
    ConstraintResult,
    ErrorKind,
    FilterRun,
    Pattern,
    Question,
    Relation,
    Result,
    Trace,
    clipped,
)


def open_examples(settings: Settings) -> ExampleSource:
    """The example source ``settings.examples`` names."""
    ex = settings.examples
    if ex.mode == "fixed":
        return FixedExamples()
    pool = sqwd_pool(settings.data_dir, limit=ex.pool_limit)
    cache_dir = private_dir(settings.cache_dir / "examples")  # embeddings of the pool's questions
    if ex.mode == "retrieved":
        return RetrievedExamples(pool, k=ex.k, cache_dir=cache_dir)
    return ClusteredExamples(pool, clusters=ex.clusters, block=ex.block, nearest=ex.nearest, cache_dir=cache_dir)


@dataclass(frozen=True)
class _DraftState:
    """What a draft and the steps after it leave in a trace, kept so that a second draft can be tried and
    undone."""

    draft_output: str
    draft: list[Pattern]
    candidates: list[Candidate]
    entities: list[str]
    options: list[Relation]
    relations: list[Relation]
    filters: list[FilterRun]
    constraints: list[ConstraintOutcome]
    notes: list[str]

    @classmethod
    def of(cls, trace: Trace) -> _DraftState:
        return cls(trace.draft_output, trace.draft, trace.candidates, trace.entities, trace.options,
                   trace.relations, trace.filters, trace.constraints, list(trace.notes))

    def restore(self, trace: Trace) -> None:
        trace.draft_output, trace.draft, trace.candidates, trace.entities = (
            self.draft_output, self.draft, self.candidates, self.entities)
        trace.options, trace.relations, trace.filters, trace.constraints = (
            self.options, self.relations, self.filters, self.constraints)
        trace.notes = list(self.notes)


class StepError(Exception):
    """A step found nothing to go on with, or could not go on: ``kind`` says which, the message what."""

    def __init__(self, message: str, *, kind: ErrorKind) -> None:
        super().__init__(message)
        self.kind = kind


def error_kind(err: Exception) -> ErrorKind:
    """The kind of an exception that ended a question's run."""
    if isinstance(err, StepError):
        return err.kind
    if isinstance(err, (draft.DraftError, relations.ChoiceError)):
        return ErrorKind.MODEL_OUTPUT
    return ErrorKind.KB if isinstance(err, KBError) else ErrorKind.INTERNAL


class Pipeline:
    """Answers questions over one knowledge base with one model.

    Args:
        kb: The knowledge base (in-process, or an actor-backed proxy of the same interface).
        llm: The model (likewise).
        examples: Few-shot examples for the draft; the fixed set by default.
        settings: Limits and switches of the steps.
        drafts: Drafts given instead of the model's, by question id (the oracle-draft diagnostic).
        vectors: Where the relation ranking keeps the embeddings of properties and predicates between
            runs (none: each process encodes them again).
    """

    def __init__(self, *, kb: KnowledgeBase, llm: LLM, examples: ExampleSource | None = None,
                 settings: PipelineSettings | None = None, drafts: Mapping[str, str] | None = None,
                 vectors: SavedVectors | None = None) -> None:
        self.kb = kb
        self.llm = llm
        self.examples = examples or FixedExamples()
        self.settings = settings or PipelineSettings()
        self.drafts = drafts or {}
        self.vectors = vectors
        #: What similar pool questions ask for (:attr:`PipelineSettings.precedent`), opened on first use.
        self._precedents: ranking.Precedents | None = None

    def with_drafts(self, drafts: Mapping[str, str]) -> Pipeline:
        """The same pipeline, with ``drafts`` (question id → draft text) given instead of the model's."""
        return Pipeline(kb=self.kb, llm=self.llm, examples=self.examples, settings=self.settings, drafts=drafts,
                        vectors=self.vectors)

    @classmethod
    def from_settings(cls, *, kb: KnowledgeBase, llm: LLM, settings: Settings,
                      examples: ExampleSource | None = None) -> Pipeline:
        """The pipeline ``settings`` describe, over ``kb`` and ``llm`` (examples as configured
        unless given)."""
        return cls(kb=kb, llm=llm, examples=examples or open_examples(settings), settings=settings.pipeline,
                   vectors=SavedVectors(settings.cache_dir / "vectors"))

    def prepare(self, questions: list[Question]) -> None:
        """Embeds ``questions`` in one encoder batch, for choosing their examples and ranking their relation
        options, before they are answered one by one (one at a time costs the encoder 3-4× the CPU)."""
        texts = [q.text for q in questions]
        self.examples.prepare(texts)
        if self.settings.rank_relations == "meaning":
            memo().vectors(texts)  # a dict lookup each where the examples have just embedded them

    async def answer(self, question: Question | str) -> Result:
        """The answers and trace of ``question``; never raises (errors land in the trace)."""
        if isinstance(question, str):
            question = Question(id="q0", text=question)
        trace = Trace(question.id, question.text, kb=redact(self.kb.spec), model=self.llm.identity)
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

    async def _drafted(self, kb: KnowledgeBase, question: str, rec: Recorder, *,
                       known: list[str] | None) -> list[Pattern]:
        """The model's draft of ``question`` (its known entity one of ``known``, default any run), parsed."""
        s = self.settings
        shots = self.examples.select(question)
        rec.trace.examples = [e.question for e in shots]
        out = await rec.generate(self.llm, draft.request(
            question, shots, constrain=s.constrain_draft, known=known,
            prefix_key=self.examples.prefix_key(question), shared=self.examples.shared(question)))
        if out.error:
            raise StepError(f"model call failed: {out.error}", kind=ErrorKind.MODEL)
        return await self._parsed(kb, question, draft.complete(out.text, completion_tokens=out.usage.completion_tokens),
                                  rec)

    async def _parsed(self, kb: KnowledgeBase, question: str, text: str, rec: Recorder) -> list[Pattern]:
        """The patterns of draft ``text``, the known entity widened where the settings say so."""
        trace = rec.trace
        trace.draft_output = clipped(text)
        patterns = draft.parse(text)
        if self.settings.widen_known and (wider := await draft.widened(kb, question, patterns[0].known)):
            trace.notes.append(f"known entity widened to a longer name in the question: "
                               f"{patterns[0].known!r} -> {wider!r}")
            patterns[0] = patterns[0].with_known(wider)
        elif self.settings.comma_known and (head := await draft.qualified(kb, question, patterns[0].known)):
            trace.notes.append(f"known entity is what it qualifies after a comma: {patterns[0].known!r} -> {head!r}")
            patterns[0] = patterns[0].with_known(head)
        trace.draft = patterns
        return patterns

    async def _linked(self, kb: KnowledgeBase, main: Pattern, trace: Trace) -> entities.Linking:
        """Step 2 for ``main``, recorded in ``trace``."""
        s = self.settings
        linking = await entities.link(kb, main.known, limit=s.search_limit, max_kept=s.max_entities,
                                      max_near=s.max_near_entities)
        trace.candidates = linking.candidates
        trace.entities = [c.id for c in linking.kept]
        return linking

    async def _ranked(self, kb: KnowledgeBase, question: str, main: Pattern,
                      linking: entities.Linking) -> list[relations.Option]:
        """Step 3's options for ``main``'s kept entities, best first, what similar questions ask for
        (:attr:`PipelineSettings.precedent`) weighing in."""
        s = self.settings
        by_entity = await relations.uses(kb, linking.kept)
        closeness = None
        if s.rank_relations == "meaning":
            properties = list({u.property.id: u.property for us in by_entity.values() for u in us}.values())
            closeness = await asyncio.to_thread(ranking.closeness, question, main.predicate, properties,
                                               saved=self.vectors)
        precedents = self.precedents() if s.precedent else None
        precedent = await precedents.of(question, main.known, s.precedent) if precedents is not None else None
        return relations.options(main, linking, by_entity, question=question, closeness=closeness,
                                 precedent=precedent)

    def precedents(self) -> ranking.Precedents | None:
        """What similar pool questions ask for (none without an embedded pool), embedded on first use."""
        if self._precedents is None and self.examples.pool is not None:
            self._precedents = ranking.Precedents(self.examples.pool)
        return self._precedents

    def _unsure(self, linking: entities.Linking, ranked: list[relations.Option]) -> bool:
        """Whether the first draft calls for a second one (:attr:`PipelineSettings.redraft`,
        :attr:`PipelineSettings.redraft_below`)."""
        s = self.settings
        if not s.constrain_draft:
            return False
        low = s.redraft_below is not None and (not ranked or ranked[0].score < s.redraft_below)
        return low or (s.redraft and not linking.exact)

    def _settled(self, ranked: list[relations.Option], trace: Trace) -> relations.Option | None:
        """The option taken without the model, if any: the one the precedent votes take over the draft's named
        one (:func:`relations.overruled`), else the ranking's obvious one, else the one the votes settle."""
        s = self.settings
        chosen = relations.overruled(ranked)
        if chosen is not None:
            first = ranked[0]
            trace.notes.append(f"the draft names {first.property.label!r} ({first.direction}), asked for by "
                               f"{first.votes:.0%} of similar questions; taken instead: "
                               f"{chosen.property.label!r} ({chosen.direction}), asked for by {chosen.votes:.0%}")
            return chosen
        chosen = relations.obvious(ranked, lead=s.sure_lead)
        if chosen is None:
            chosen = relations.voted(ranked, lead=s.votes_lead)
            if chosen is not None:
                trace.notes.append(f"taken by the votes of similar questions: {chosen.property.label!r} "
                                   f"({chosen.direction}), asked for by {chosen.votes:.0%}")
        return chosen

    async def _unasked(self, kb: KnowledgeBase, question: str, main: Pattern, ranked: list[relations.Option]) -> bool:
        """Whether similar questions ask for none of the first draft's options (:func:`relations.unasked`,
        :attr:`PipelineSettings.redraft_unasked`) but for a property the base has, by the name they give it, with
        :data:`relations.OVERRULING` of the votes or more: then a second draft is tried, and taken only if they ask
        for its best option (:meth:`_redrafted`). A base that names its properties otherwise (DBpedia's "birth
        place") gets no such second drafts: the votes, in the example pool's names, ask for none of its options."""
        s = self.settings
        precedents = self.precedents() if s.precedent else None
        if not (s.redraft_unasked and s.constrain_draft and s.redraft_below is not None and precedents is not None
                and relations.unasked(ranked)):
            return False
        votes = await precedents.of(question, main.known, s.precedent)
        top = max(votes.items(), key=lambda vote: vote[1], default=None)
        if top is None or top[1] < relations.OVERRULING:
            return False
        (name, _), _ = top
        return any(name_key(p.label) == name for p in await kb.search_properties(name, limit=5))

    def _offered(self, question: str, main: Pattern, linking: entities.Linking) -> bool:
        """Whether the draft's known entity is an answer the question offers ("male" in "is X male or female?"):
        then a second draft is tried as where the first found nothing (:meth:`_redrafted`)."""
        s = self.settings
        return (s.constrain_draft and s.redraft_below is not None
                and draft.offered(question, main.known, exact=linking.exact))

    async def _redrafted(self, kb: KnowledgeBase, question: str, rec: Recorder, main: Pattern,
                         linking: entities.Linking, ranked: list[relations.Option], *, asked: bool = False
                         ) -> tuple[list[Pattern], entities.Linking, list[relations.Option]] | None:
        """A second draft whose known entity is one of the question's runs that name an item exactly and
        are not part of the first draft's (:attr:`PipelineSettings.redraft_each`: one draft for each of the
        first such runs): the one whose best option scores highest is taken (patterns, linking, options)
        when it scores higher than the first draft's (and, where the first found no entity or no statement or drafted
        an answer the question offers, when it is not unsure itself: its best option scores at least
        :attr:`PipelineSettings.redraft_below`; with ``asked``, also when similar questions ask for its best option,
        :data:`relations.OVERRULING` of the votes or more), else ``None`` and the trace as the first draft left it. A
        run that the question offers as an answer ("male or female") is never drafted as the known entity."""
        runs = [r for r in draft.elsewhere(await draft.grounded(kb, question) or [], main.known, exact=linking.exact)
                if not draft.offered(question, r)]
        if not runs:
            return None
        each, below = self.settings.redraft_each, self.settings.redraft_below
        knowns = [[r] for r in sorted(outermost(runs), key=len, reverse=True)[:each]] if each > 1 else [runs]
        trace = rec.trace
        first_draft = _DraftState.of(trace)
        first = ranked[0].score if ranked else float("-inf")
        best: tuple[float, list[Pattern], entities.Linking, list[relations.Option], _DraftState] | None = None
        outcomes = []  # a second draft the same as the first goes unremarked
        for known in knowns:
            first_draft.restore(trace)
            try:
                patterns = await self._drafted(kb, question, rec, known=known)
            except (StepError, draft.DraftError) as err:
                outcomes.append(f"failed: {err}")
                continue
            if patterns[0] == main:
                continue
            found = await self._linked(kb, patterns[0], trace)
            second = await self._ranked(kb, question, patterns[0], found) if found.kept else []
            score = second[0].score if second else float("-inf")
            sure = bool(ranked) or below is None or score >= below
            if asked:
                sure = sure and score > float("-inf") and second[0].votes >= relations.OVERRULING
            if sure and score > first and (best is None or score > best[0]):
                best = (score, patterns, found, second, _DraftState.of(trace))
            outcomes.append(f"{patterns[0]} (best option {score:.3f})")
        if best is not None:
            score, patterns, found, second, state = best
            state.restore(trace)
            trace.notes.append(f"second draft over exact names taken: {patterns[0]} (best option {score:.3f} "
                               f"against {first:.3f} for {main}; tried: {'; '.join(outcomes)})")
            return patterns, found, second
        first_draft.restore(trace)
        if outcomes:
            trace.notes.append(f"second draft over exact names not taken: {'; '.join(outcomes)} "
                               f"against {first:.3f}")
        return None

    async def _run(self, question: Question, rec: Recorder) -> list:
        trace, s = rec.trace, self.settings
        kb = CountingKB(self.kb, trace)
        with rec.step("input"):
            if question.error:
                raise StepError(question.error, kind=ErrorKind.INPUT)
            if len(question.text) > s.max_question_chars:
                raise StepError(f"question too long ({len(question.text)} characters; "
                                f"limit {s.max_question_chars})", kind=ErrorKind.INPUT)
            if not words(question.text):
                raise StepError("question has no words", kind=ErrorKind.INPUT)

        with rec.step("draft"):
            text = self.drafts.get(question.id)
            if text is not None:
                trace.notes.append("draft given (oracle), no model call")
                patterns = await self._parsed(kb, question.text, text, rec)
            else:
                known = None
                if s.constrain_draft and s.ground_draft != "off":
                    known = await draft.grounded(kb, question.text, longest=s.ground_draft == "longest")
                patterns = await self._drafted(kb, question.text, rec, known=known)
            main = patterns[0]

        with rec.step("entities"):
            linking = await self._linked(kb, main, trace)
            second = None
            if not linking.kept:
                if text is None and self._unsure(linking, []):
                    with rec.step("redraft"):
                        second = await self._redrafted(kb, question.text, rec, main, linking, [])
                if second is None:
                    raise StepError(f"no entity found for {main.known!r}", kind=ErrorKind.NO_ENTITY)

        with rec.step("relations"):
            if second is None:
                ranked = await self._ranked(kb, question.text, main, linking)
                offered = self._offered(question.text, main, linking)
                unsure = not offered and self._unsure(linking, ranked)
                unasked = not (offered or unsure) and await self._unasked(kb, question.text, main, ranked)
                if text is None and (offered or unsure or unasked):
                    with rec.step("redraft"):
                        second = await self._redrafted(kb, question.text, rec, main, linking,
                                                       ranked if unsure else [], asked=unasked)
            if second is not None:
                patterns, linking, ranked = second
                main = patterns[0]
            if not ranked:
                raise StepError(f"no statements about {', '.join(trace.entities)}", kind=ErrorKind.NO_STATEMENTS)
            trace.options = [r for o in ranked for r in o.relations()]
            chosen = await self._chosen(question.text, main, ranked, rec)
            trace.relations = chosen.relations()

        with rec.step("answers"):
            found, trace.filters = await answers.run_filters(kb, trace.relations)
            for constraint in patterns[1:]:
                found, outcome = await answers.constrain(kb, found, constraint)
                trace.constraints.append(outcome)
        if (text is None and second is None and s.redraft_over is not None and len(found) > s.redraft_over
                and len(patterns) == 1 and main.direction == "backward"):
            with rec.step("redraft"):
                found = await self._kind_redrafted(kb, question.text, rec, main, linking, chosen, found)
        return found

    async def _chosen(self, question: str, main: Pattern, ranked: list[relations.Option],
                      rec: Recorder) -> relations.Option:
        """Step 3's choice among ``ranked``: settled without the model where it can be (:meth:`_settled`), else
        the model's."""
        s = self.settings
        chosen = self._settled(ranked, rec.trace)
        if chosen is None:
            shown = relations.contenders(ranked, lead=s.sure_lead, most=s.max_options)
            out = await rec.generate(self.llm, relations.request(question, main, shown, abstain=s.abstain))
            if out.error:
                raise StepError(f"model call failed: {out.error}", kind=ErrorKind.MODEL)
            chosen = relations.parse(out.text, shown, abstain=s.abstain)
            if chosen is None:
                raise StepError(f"none of the {len(shown)} relation options answers the question",
                                kind=ErrorKind.ABSTAINED)
        return chosen

    async def _kind_redrafted(self, kb: KnowledgeBase, question: str, rec: Recorder, main: Pattern,
                              linking: entities.Linking, chosen: relations.Option,
                              found: list[Answer]) -> list[Answer]:
        """The answers of a second draft over the question's other exact names (:meth:`_redrafted`), the first
        draft ``main`` kept as its constraint, where the first answered with more than
        :attr:`PipelineSettings.redraft_over` (a kind drafted as the known entity: "Who's an actor from
        pittsburgh" as ``(?x | occupation | actor)``), and the second's option may replace the first's ``chosen``
        (:func:`relations.narrows`; where the first is what the question asks for, "a japanese football player that
        plays defender", the votes say so) and answers with fewer, but some: the relation is the main pattern and
        the kind the constraint. Else ``found``, and the trace as the first draft left it."""
        trace = rec.trace
        first = _DraftState.of(trace)
        second = await self._redrafted(kb, question, rec, main, linking, [])
        if second is None:
            return found
        patterns, _, ranked = second
        try:
            trace.options = [r for o in ranked for r in o.relations()]
            choice = await self._chosen(question, patterns[0], ranked, rec)
        except (StepError, relations.ChoiceError) as err:
            first.restore(trace)
            trace.notes.append(f"second draft for the kind's {len(found)} answers failed: {err}")
            return found
        trace.relations = choice.relations()
        tried = (f"{patterns[0]}: {choice.property.label!r} ({choice.direction}), asked for by {choice.votes:.0%} of "
                 f"similar questions against {chosen.votes:.0%} for {chosen.property.label!r} ({chosen.direction})")
        narrower: list[Answer] = []
        if relations.narrows(chosen, choice):
            narrower, trace.filters = await answers.run_filters(kb, trace.relations)
            tried += f", answers with {len(narrower)}"
        if not 0 < len(narrower) < len(found):
            first.restore(trace)
            trace.notes.append(f"second draft for the kind's {len(found)} answers not taken: {tried}")
            return found
        kinds = {a.answer for a in found}
        kept = [a for a in narrower if a.answer in kinds]
        result = ConstraintResult.APPLIED if kept else ConstraintResult.UNMET
        trace.draft = [patterns[0], main]
        trace.constraints = [ConstraintOutcome(constraint=main, result=result, kept=len(kept or narrower),
                                               of=len(narrower))]
        trace.notes.append(f"the first draft's {len(found)} answers are a kind: {patterns[0]} taken as the main "
                           f"pattern, {main} as its constraint")
        return kept or narrower
