"""The one redraft policy: when a first draft calls for a second one (:func:`reason`), which second drafts are
tried (over the question's other exact names, :func:`second`), and when one replaces the first (:func:`beats`).

A second draft is a new :class:`~kifqa.pipeline.attempt.Attempt`; the first is kept as it is, and whichever is
taken is what the trace is written from.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kifqa.data.text import name_key
from kifqa.examples.text import offered, outermost
from kifqa.pipeline import answers, attempt, draft, relations
from kifqa.pipeline.answers import Answered
from kifqa.pipeline.attempt import Attempt
from kifqa.pipeline.context import Context, StepError
from kifqa.pipeline.relations import Choice
from kifqa.types import ConstraintOutcome, ConstraintResult, Convention


class Reason(StrEnum):
    """Why a first draft is drafted again."""

    #: Its known entity finds no item.
    NO_ENTITY = "no_entity"
    #: Its items have no statement.
    NO_STATEMENTS = "no_statements"
    #: Its best option scores below :attr:`~kifqa.config.PipelineSettings.redraft_below`.
    LOW_SCORE = "low_score"
    #: Its known entity is an answer the question offers ("male" in "is X male or female?",
    #: :func:`~kifqa.examples.text.offered`).
    OFFERED = "offered"
    #: Similar questions ask for none of its options, but for a property the base has
    #: (:attr:`~kifqa.config.PipelineSettings.redraft_unasked`).
    UNASKED = "unasked"
    #: It is backward and answers with more than :attr:`~kifqa.config.PipelineSettings.redraft_over`: it may have
    #: drafted the kind the question asks for as its known entity, as Wikidata's ``occupation`` and ``instance of``
    #: name kinds (a Wikidata-shaped base only: :attr:`~kifqa.pipeline.context.Context.wikidata_shaped`).
    KIND = "kind"


#: The reasons for which a second draft must beat the first's best option; for the others the first counts as
#: having none, and the second must be sure of itself (its best option scores at least ``redraft_below``).
_COMPARED = frozenset({Reason.LOW_SCORE})


async def reason(ctx: Context, first: Attempt, answered: Answered | None = None) -> Reason | None:
    """Why ``first`` calls for a second draft, if it does: before its choice (``answered`` ``None``), for what
    it found; after its answers, for how many it found. An oracle draft is never drafted again."""
    s = ctx.settings
    if first.drafted.given:
        return None
    if answered is not None:
        over = s.redraft_over is not None and len(answered.answers) > s.redraft_over
        kind = over and len(first.drafted.patterns) == 1 and first.main.direction == "backward" and ctx.wikidata_shaped
        return Reason.KIND if kind else None
    if not s.constrain_draft or first.linking is None:
        return None
    if not first.linking.kept:
        return Reason.NO_ENTITY if s.redraft_below is not None else None
    if s.redraft_below is not None:
        if (s.redraft_offered and ctx.follows(Convention.OFFERED)
                and offered(ctx.question, first.main.known, exact=first.linking.exact)):
            return Reason.OFFERED
        if not first.options:
            return Reason.NO_STATEMENTS
        if first.best < s.redraft_below:
            return Reason.LOW_SCORE
    return Reason.UNASKED if await _unasked(ctx, first) else None


async def _unasked(ctx: Context, first: Attempt) -> bool:
    """Whether similar questions ask for none of ``first``'s options (:func:`~kifqa.pipeline.relations.unasked`)
    but, with :data:`~kifqa.pipeline.relations.OVERRULING` of the votes or more, for a property the base has by the
    name they give it. A base that names its properties otherwise (DBpedia's "birth place") gets no such second
    drafts: the votes, in the example pool's names, ask for none of its options."""
    s = ctx.settings
    if not (s.redraft_unasked and s.redraft_below is not None and relations.unasked(first.options)):
        return False
    votes = await ctx.votes(first.main.known)
    top = max(votes.items(), key=lambda vote: vote[1], default=None) if votes is not None else None
    if top is None or top[1] < relations.OVERRULING:
        return False
    (name, _), _ = top
    return any(name_key(p.label) == name for p in await ctx.kb.search_properties(name, limit=5))


def beats(second: Attempt, first: Attempt, why: Reason, *, below: float | None) -> bool:
    """Whether ``second`` may replace ``first``: its best option scores higher than the first's where the first is
    merely unsure (:data:`_COMPARED`); elsewhere it must have an option, scoring at least ``below`` (where set);
    for :attr:`Reason.UNASKED` similar questions must also ask for its best option
    (:data:`~kifqa.pipeline.relations.OVERRULING` of the votes or more)."""
    compared = why in _COMPARED and bool(first.options)
    if second.best <= (first.best if compared else float("-inf")):
        return False
    if not compared and below is not None and second.best < below:
        return False
    return why is not Reason.UNASKED or second.options[0].votes >= relations.OVERRULING


@dataclass(frozen=True)
class Redraft:
    """The second drafts tried for a first one, why, and the one taken (the best that :func:`beats` the first)."""

    reason: Reason
    tried: tuple[Attempt, ...]
    #: Why the second drafts that went no further than their draft stopped there.
    failed: tuple[str, ...]
    taken: Attempt | None


async def second(ctx: Context, first: Attempt, why: Reason) -> Redraft:
    """Second drafts of the question whose known entity is one of its runs that name an item exactly and are not
    part of the first draft's (:func:`_knowns`); a draft the same as the first is not followed."""
    tried, failed = [], []
    for known in await _knowns(ctx, first):
        try:
            drafted = await draft.step(ctx, known=known)
        except (StepError, draft.DraftError) as err:
            failed.append(str(err))
            continue
        if drafted.main != first.main:
            tried.append(await attempt.follow(ctx, drafted))
    taken = None
    for candidate in tried:
        if beats(candidate, first, why, below=ctx.settings.redraft_below) and (
                taken is None or candidate.best > taken.best):
            taken = candidate
    return Redraft(why, tuple(tried), tuple(failed), taken)


async def _knowns(ctx: Context, first: Attempt) -> list[list[str]]:
    """The known entities the second drafts' grammars admit: the question's runs that name an item exactly,
    outside the first draft's known entity (:func:`~kifqa.pipeline.draft.elsewhere`) and, where the pool bears
    :attr:`~kifqa.types.Convention.OFFERED` out, not an answer the question offers; one draft over all of them, or
    one for each of the first
    :attr:`~kifqa.config.PipelineSettings.redraft_each` (the outermost, longest first)."""
    exact = first.linking is not None and first.linking.exact
    named = await draft.grounded(ctx.kb, ctx.question) or []
    runs = draft.elsewhere(named, first.main.known, exact=exact)
    if ctx.follows(Convention.OFFERED):
        runs = [r for r in runs if not offered(ctx.question, r)]
    if not runs:
        return []
    each = ctx.settings.redraft_each
    return [[r] for r in sorted(outermost(runs), key=len, reverse=True)[:each]] if each > 1 else [runs]


@dataclass(frozen=True)
class Kind:
    """A second draft for a first whose answers are a kind (:attr:`Reason.KIND`): its choice, the answers of
    its option where it :func:`~kifqa.pipeline.relations.narrows` the first's, and, where it is taken, the answers
    with the first draft applied as its constraint."""

    redraft: Redraft
    choice: Choice | None = None
    narrower: Answered | None = None
    error: str | None = None
    answered: Answered | None = None


async def kind(ctx: Context, first: Attempt, chosen: Choice, found: Answered) -> Kind:
    """The second draft over the question's other exact names, where ``first`` answered with a kind ("Who's an
    actor from pittsburgh" as ``(?x | occupation | actor)``): taken where its option narrows ``chosen`` and answers
    with fewer, but some; the relation is then the main pattern and the kind (``first``'s draft) its constraint."""
    redraft = await second(ctx, first, Reason.KIND)
    if redraft.taken is None:
        return Kind(redraft)
    try:
        choice = await relations.choose(ctx, redraft.taken.main, redraft.taken.options)
    except (StepError, relations.ChoiceError) as err:
        return Kind(redraft, error=str(err))
    narrower = None
    if relations.narrows(chosen.option, choice.option):
        narrower = await answers.step(ctx, choice.option.relations(), ())
    if narrower is None or not 0 < len(narrower.answers) < len(found.answers):
        return Kind(redraft, choice, narrower)
    kinds = {a.answer for a in found.answers}
    kept = tuple(a for a in narrower.answers if a.answer in kinds)
    outcome = ConstraintOutcome(constraint=first.main, result=ConstraintResult.APPLIED if kept else
                                ConstraintResult.UNMET, kept=len(kept or narrower.answers), of=len(narrower.answers))
    return Kind(redraft, choice, narrower, answered=Answered(kept or narrower.answers, narrower.filters, (outcome,)))
