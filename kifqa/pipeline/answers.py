"""Steps 4 and 5: one KIF filter per chosen (entity, property, direction), run concurrently;
constraint patterns then narrow the answers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kifqa.examples.text import similarity
from kifqa.kb.base import FilterResult, KnowledgeBase
from kifqa.pipeline.context import Context
from kifqa.pipeline.entities import link
from kifqa.types import Answer, ConstraintOutcome, ConstraintResult, Convention, FilterRun, Pattern, Relation

#: How well a constraint's predicate must name a property to be applied without the model.
CONSTRAINT_MIN_SIMILARITY = 0.5


@dataclass(frozen=True)
class Answered:
    """Steps 4 and 5's result: the answers, the filters that found them, and what each constraint did."""

    answers: tuple[Answer, ...]
    filters: tuple[FilterRun, ...]
    constraints: tuple[ConstraintOutcome, ...] = ()


async def step(ctx: Context, relations: Sequence[Relation], constraints: Sequence[Pattern]) -> Answered:
    """Steps 4 and 5: the statements of ``relations`` (:func:`run_filters`), narrowed by each of ``constraints`` in
    turn (:func:`constrain`)."""
    found, filters = await run_filters(ctx.kb, relations)
    outcomes = []
    for constraint in constraints:
        found, outcome = await constrain(ctx.kb, found, constraint, handles=ctx.follows(Convention.HANDLE),
                                         plurals=ctx.english)
        outcomes.append(outcome)
    return Answered(tuple(found), tuple(filters), tuple(outcomes))


async def run_filters(kb: KnowledgeBase, relations: Sequence[Relation]) -> tuple[list[Answer], list[FilterRun]]:
    """Runs every relation's filter concurrently; the answers are the union of their statements."""

    async def one(r: Relation) -> tuple[FilterResult, float]:
        start = time.perf_counter()
        result = await kb.facts(r.entity, r.property, r.direction)
        return result, time.perf_counter() - start

    results = await asyncio.gather(*(one(r) for r in relations))
    answers: dict[tuple[str, str, str], Answer] = {}
    runs = []
    for r, (result, seconds) in zip(relations, results):
        runs.append(FilterRun(relation=r, filter=result.filter, sparql=result.sparql,
                              n_statements=len(result.facts), seconds=seconds, truncated=result.truncated,
                              batch=result.batch))
        for f in result.facts:
            key = (f.subject, f.property, f.value)
            if r.direction == "forward":
                answers.setdefault(key, Answer(fact=f, answer=f.value, answer_label=f.value_label))
            else:
                answers.setdefault(key, Answer(fact=f, answer=f.subject, answer_label=f.subject_label))
    return list(answers.values()), runs


async def constrain(kb: KnowledgeBase, answers: list[Answer], constraint: Pattern, *,
                    handles: bool = True, plurals: bool = True) -> tuple[list[Answer], ConstraintOutcome]:
    """Keeps the answers ``a`` for which ``(a, p, e)`` holds, where ``e`` is the constraint's
    entity (:func:`~kifqa.pipeline.entities.link`, ``handles`` and ``plurals`` as there) and ``p`` the property of
    ``e`` (as value) that best names the constraint's predicate, and says what it did. A constraint that cannot be
    resolved, or that no answer meets, leaves the answers as they are: a constraint narrows, it never empties."""

    def outcome(result: ConstraintResult, kept: int, relations: tuple[Relation, ...] = ()) -> ConstraintOutcome:
        return ConstraintOutcome(constraint=constraint, result=result, kept=kept, of=len(answers), relations=relations)

    linking = await link(kb, constraint.object, handles=handles, plurals=plurals)
    if not linking.exact:
        return answers, outcome(ConstraintResult.UNRESOLVED, len(answers))
    allowed: set[str] = set()
    applied: list[Relation] = []
    for entity in linking.kept:
        uses = [u for u in (await kb.properties_of(entity.id)).uses if u.direction == "backward"]
        scored = [(similarity(constraint.predicate, u.property.label, u.property.aliases), u) for u in uses]
        best = max(scored, key=lambda s: s[0], default=(0.0, None))
        if best[1] is None or best[0] < CONSTRAINT_MIN_SIMILARITY:
            continue
        relation = Relation(entity=entity.id, property=best[1].property.id, direction="backward")
        result = await kb.facts(relation.entity, relation.property, relation.direction)
        allowed.update(f.subject for f in result.facts)
        applied.append(relation)
    kept = [a for a in answers if a.answer in allowed]
    if not kept:
        return answers, outcome(ConstraintResult.UNMET, len(answers))
    return kept, outcome(ConstraintResult.APPLIED, len(kept), tuple(applied))
