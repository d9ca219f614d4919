"""Step 3: the properties the kept entities really have; the one that fits the draft is chosen."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Literal

from kifqa.data.text import name_key, normalize
from kifqa.examples import precedents as meaning
from kifqa.examples.precedents import NamedRelation
from kifqa.examples.text import ALIAS_MATCH, SPELLING_MATCH, article_takers, similarity, tokens
from kifqa.kb.base import KnowledgeBase, PropertyUse
from kifqa.llm.base import ChatRequest, Message
from kifqa.pipeline.context import Context, StepError
from kifqa.pipeline.entities import Linking
from kifqa.types import (
    UNKNOWN,
    Candidate,
    ChoiceOption,
    Convention,
    Direction,
    ErrorKind,
    Pattern,
    Relation,
    RelationChoice,
)

_SYSTEM = resources.files("kifqa.pipeline").joinpath("prompts/choose_system.txt").read_text().strip()

#: The value types every question may be answered with: entities (``""``: the base does not say).
ENTITY_TYPES = frozenset({"item", "property", ""})

#: English question words that ask for values other than entities, and the value types they ask for (read only in
#: an English pool's questions: :attr:`~kifqa.pipeline.context.Context.english`).
_ASKS = (
    (re.compile(r"\b(when|what year|which year|what date|which date|what day|how old)\b"), frozenset({"time"})),
    (re.compile(r"\bhow (many|much|tall|long|high|big|large|heavy|wide|far|deep)\b"), frozenset({"quantity"})),
)

#: :attr:`Option.match` of a property whose description holds every content word of the draft's
#: predicate (less in proportion): below a label or alias that names the predicate.
DESCRIPTION_MATCH = 0.4

#: What each place down the search's order of near-match names costs an option's score: more than
#: agreeing with the draft's direction gains (the draft's direction is a guess, the name is evidence).
NEAR_RANK_STEP = 0.06

#: :attr:`Option.match` of a property as close in meaning to the question as can be: below an alias.
MEANING_MATCH = 0.8

#: What an option's score gains when every one of the pool's questions nearest to the question asks for its
#: property in its direction (:meth:`kifqa.examples.precedents.Precedents.of`; less in proportion).
PRECEDENT_WEIGHT = 0.5

#: The precedent votes overrule the draft's exactly named first option (:func:`overruling`) when fewer than
#: :data:`OVERRULED_BELOW` of them ask for it and :data:`OVERRULING` or more for another option.
OVERRULED_BELOW = 0.1
OVERRULING = 0.35
#: ... and whatever their share of it, when another option leads it by :data:`OVERRULING_LEAD` of the votes or
#: more: "where is gary harrell from" drafted with ``place of birth`` (17 %) over ``country of citizenship``
#: (75 %), which a base with both properties puts apart.
OVERRULING_LEAD = 0.4


def wanted_types(question: str) -> frozenset[str]:
    """The value types that answer ``question``, an English one: entities, plus dates for "when" and quantities for
    "how many" (and the like)."""
    text = normalize(question)
    return ENTITY_TYPES.union(*(types for pattern, types in _ASKS if pattern.search(text)))


@dataclass(frozen=True)
class Option:
    """A way to answer: a property in one direction, for a group of entities that share it."""

    entities: tuple[Candidate, ...]
    property: Candidate
    direction: Direction
    #: How well the property names the draft's predicate (:func:`similarity`).
    match: float
    #: ``match`` adjusted for direction, entity rank and ``votes``: the order options are shown in.
    score: float
    #: The share of the precedent votes that ask for its property in its direction (0 without votes).
    votes: float = 0.0
    #: How many namesakes shared it before the article the question writes kept those whose name takes it
    #: (:func:`agreeing`; 0 where it kept them all).
    namesakes: int = 0

    def relations(self) -> list[Relation]:
        return [Relation(e.id, self.property.id, self.direction) for e in self.entities]

    def shown(self) -> ChoiceOption:
        """The option as the model sees it: the first entity named with its description and aliases."""
        entity = self.entities[0]
        about = ", ".join(x for x in (entity.description, "aka " + "; ".join(entity.aliases[:2])
                                      if entity.aliases else "") if x)
        name = f"{entity.label} [{about}]" if about else entity.label
        pattern = (Pattern(name, self.property.label, UNKNOWN) if self.direction == "forward"
                   else Pattern(UNKNOWN, self.property.label, name))
        return ChoiceOption(pattern, self.property.description[:60])


async def step(ctx: Context, pattern: Pattern, linking: Linking) -> tuple[Option, ...]:
    """Step 3's options for ``pattern``'s kept entities, best first (:func:`options`; none without kept entities),
    ranked by closeness in meaning where the settings say so and weighed by what similar questions of the pool ask
    for (:meth:`~kifqa.pipeline.context.Context.votes`); namesakes told apart by the question's article where the
    pool bears :attr:`~kifqa.types.Convention.ARTICLE` out."""
    if not linking.kept:
        return ()
    by_entity = await uses(ctx.kb, linking.kept)
    closeness = None
    if ctx.settings.rank_relations == "meaning":
        properties = list({u.property.id: u.property for us in by_entity.values() for u in us}.values())
        closeness = await asyncio.to_thread(meaning.closeness, ctx.question, pattern.predicate, properties,
                                            saved=ctx.vectors)
    votes = await ctx.votes(pattern.known)
    return tuple(options(pattern, linking, by_entity, question=ctx.question, closeness=closeness, votes=votes,
                         articles=ctx.follows(Convention.ARTICLE), typed=ctx.english))


#: How an option was chosen: the precedent votes over the draft's named option (:func:`overruling`), the ranking's
#: obvious one (:func:`obvious`), or the model.
ChosenBy = Literal["overruled", "obvious", "model"]


@dataclass(frozen=True)
class Choice:
    """Step 3's result: the option taken, how, and among which ranked options."""

    option: Option
    by: ChosenBy
    ranked: tuple[Option, ...]


async def choose(ctx: Context, pattern: Pattern, ranked: Sequence[Option]) -> Choice:
    """Step 3's choice among ``ranked``: without the model where the votes overrule the draft's named option, where
    the ranking has an obvious one or where the votes settle it; else the model's among the contenders
    (:func:`contenders`)."""
    s, ranked = ctx.settings, tuple(ranked)
    if s.overrule and (chosen := overruling(ranked)) is not None:
        return Choice(chosen, "overruled", ranked)
    if (chosen := obvious(ranked, lead=s.sure_lead)) is not None:
        return Choice(chosen, "obvious", ranked)
    shown = contenders(ranked, lead=s.sure_lead, most=s.max_options)
    out = await ctx.recorder.generate(ctx.llm, request(ctx.question, pattern, shown))
    if out.error:
        raise StepError(f"model call failed: {out.error}", kind=ErrorKind.MODEL)
    return Choice(parse(out.text, shown), "model", ranked)


async def uses(kb: KnowledgeBase, entities: list[Candidate]) -> dict[str, list[PropertyUse]]:
    """Each entity's real properties with their direction, fetched concurrently."""
    found = await asyncio.gather(*(kb.properties_of(e.id) for e in entities))
    return {e.id: list(p.uses) for e, p in zip(entities, found)}


def options(pattern: Pattern, linking: Linking, by_entity: dict[str, list[PropertyUse]], *,
            question: str = "", closeness: Mapping[str, float] | None = None,
            votes: Mapping[NamedRelation, float] | None = None, articles: bool = True,
            typed: bool = True) -> list[Option]:
    """The ways to answer, best first by how well the property names the draft's predicate and whether
    its direction agrees with the draft. A property named exactly (label, then alias) comes first;
    the others rank by ``closeness`` (property id → closeness in meaning to the question,
    :mod:`kifqa.examples.precedents`) where it is given, else by their names' spelling and words and
    their descriptions' words.

    Entities that share a name share one option per (property, direction): all the kept ones when
    they are named exactly (with ``articles``, of those the ones whose name takes the article the question
    writes, where only some do: :func:`agreeing`), each near-match name's namesakes otherwise, where the search's order
    among the names weighs more than the draft's direction (:data:`NEAR_RANK_STEP`). Properties whose values are not
    what ``question`` asks for (with ``typed``, an English question: :func:`wanted_types`, an identifier, a date or
    a width for "who" or "where") are left out unless the draft names them, or unless nothing else is left."""
    groups: dict[tuple, tuple[list[Candidate], PropertyUse]] = {}
    rank = {e.id: i for i, e in enumerate(linking.kept)}
    for entity in linking.kept:
        for use in by_entity.get(entity.id, []):
            name = () if linking.exact else (name_key(entity.label),)
            members, _ = groups.setdefault((*name, use.property.id, use.direction), ([], use))
            members.append(entity)
    wanted = wanted_types(question) if question and typed else None
    out: list[Option] = []
    passed_over: list[Option] = []
    told = articles and linking.exact and bool(question)
    takers = article_takers(question, pattern.known, linking.kept) if told else None
    for all_members, use in groups.values():
        members = agreeing(all_members, takers)
        match = _match(pattern.predicate, use.property, closeness)
        score = match + (0.05 if use.direction == pattern.direction else 0.0)
        score -= 0.0 if linking.exact else NEAR_RANK_STEP * rank[members[0].id]
        share = votes.get((name_key(use.property.label), use.direction), 0.0) if votes else 0.0
        score += PRECEDENT_WEIGHT * share
        namesakes = len(all_members) if len(members) < len(all_members) else 0
        option = Option(tuple(members), use.property, use.direction, match, score, share, namesakes)
        fits = wanted is None or use.direction == "backward" or use.value_type in wanted or match >= ALIAS_MATCH
        (out if fits else passed_over).append(option)
    out = out or passed_over
    out.sort(key=lambda o: -o.score)
    return out


def agreeing(members: list[Candidate], takers: frozenset[str] | None) -> list[Candidate]:
    """Of ``members``, those whose name takes the question's article (``takers``,
    :func:`~kifqa.examples.text.article_takers`): "The Suicide Club" for "which film genre is the suicide club under",
    "Infidel" rather than "The Infidel" for "which author wrote infidel". All of them where none or all do, or where
    ``takers`` is ``None``."""
    if takers is None:
        return members
    agree = [c for c in members if c.id in takers]
    return agree if 0 < len(agree) < len(members) else members


def _match(predicate: str, prop: Candidate, closeness: Mapping[str, float] | None) -> float:
    """How well ``predicate`` names ``prop``: its label or an alias exactly; else its closeness in meaning
    scaled to :data:`MEANING_MATCH` where ``closeness`` is given (or a spelling as close as a typo's,
    :data:`SPELLING_MATCH`: "chid" for "child"); else the best of :func:`similarity` to
    its label and aliases and the share of its content words in the property's description, scaled to
    :data:`DESCRIPTION_MATCH`."""
    named = similarity(predicate, prop.label, prop.aliases, floor=0.0 if closeness is None else SPELLING_MATCH)
    if named >= ALIAS_MATCH:
        return named
    if closeness is not None:
        return max(MEANING_MATCH * closeness.get(prop.id, 0.0), named if named >= SPELLING_MATCH else 0.0)
    words = tokens(predicate)
    described = DESCRIPTION_MATCH * len(words & tokens(prop.description)) / len(words) if words else 0.0
    return max(named, described)


def overruling(ranked: Sequence[Option]) -> Option | None:
    """The option the precedent votes take instead of the first, which the draft's predicate names exactly:
    the other property and direction with the most votes, when it has :data:`OVERRULING` or more and the first
    fewer than :data:`OVERRULED_BELOW` ("which actor was born in atlanta" drafted with ``actor``: none of the
    votes for ``performer``, 62 % for ``place of birth``, backward), or when it leads the first by
    :data:`OVERRULING_LEAD` or more."""
    first = ranked[0] if ranked else None
    if first is None or first.match < ALIAS_MATCH:
        return None
    others = [o for o in ranked if (o.property.id, o.direction) != (first.property.id, first.direction)]
    best = max(others, key=lambda o: o.votes, default=None)
    if best is None:
        return None
    if first.votes < OVERRULED_BELOW and best.votes >= OVERRULING or best.votes - first.votes >= OVERRULING_LEAD:
        return best
    return None


def narrows(kind: Option, relation: Option) -> bool:
    """Whether a second draft's chosen option ``relation`` may be the main pattern where the first's, ``kind``,
    answered with a kind (:attr:`~kifqa.config.PipelineSettings.redraft_over`): the precedent votes ask for it more
    (65 % for ``place of birth`` with "pittsburgh" left out of "who's an actor from pittsburgh", against 30 % for
    ``occupation`` with "actor" left out), and it answers the same way round (people, not the production company of
    a film called "Film" for "which 1939 film was produced by metro-goldwyn-mayer")."""
    return relation.votes > kind.votes and relation.direction == kind.direction


def unasked(ranked: Sequence[Option]) -> bool:
    """Whether the precedent votes ask for none of the options: the first has fewer than :data:`OVERRULED_BELOW`
    of them and none :data:`OVERRULING` or more. The votes then ask for a relation the draft's entity does not
    have: "whats the name of a baseball pitcher" drafted over ``baseball`` (85 % of the votes for ``position
    played on team``, backward, which ``pitcher`` has)."""
    return bool(ranked) and ranked[0].votes < OVERRULED_BELOW and all(o.votes < OVERRULING for o in ranked)


def obvious(ranked: Sequence[Option], *, lead: float | None = None) -> Option | None:
    """The option to take without asking the model: the only one; the best of those whose
    property the draft's predicate names exactly, when it is strictly best (a label beats an
    alias; then the draft's direction, then the search's order of near-match entities); or the first,
    when its score leads the second's by ``lead`` or more."""
    if len(ranked) == 1 or (lead is not None and ranked[0].score - ranked[1].score >= lead):
        return ranked[0]
    exact = [o for o in ranked if o.match >= ALIAS_MATCH]
    if len(exact) == 1 or (exact and exact[0].score > exact[1].score):
        return exact[0]
    return None


def contenders(ranked: Sequence[Option], *, lead: float | None, most: int) -> list[Option]:
    """The options the model chooses among where :func:`obvious` found none: the first ``most``, of those only
    the ones the first does not lead by ``lead`` or more (all of them with ``lead`` ``None``): the model decides
    what the ranking cannot, never an option the ranking puts far below."""
    shown = list(ranked[:most])
    return shown if lead is None else [o for o in shown if shown[0].score - o.score < lead]


def request(question: str, pattern: Pattern, shown: Sequence[Option]) -> ChatRequest:
    """Asks the model for one option's number (the grammar admits only the shown numbers). Its system
    prompt is a prefix every relation choice shares (:func:`shared_prefix`)."""
    user = str(RelationChoice(question, pattern, tuple(o.shown() for o in shown)))
    numbers = " | ".join(f'"{i}"' for i in range(1, len(shown) + 1))
    prefix = shared_prefix()
    return replace(prefix, messages=(prefix.messages[0], Message("user", user)), grammar=f"root ::= {numbers}")


def shared_prefix() -> ChatRequest:
    """A request holding only what every relation choice shares, its system prompt, under its
    ``prefix_key``: the local backend keeps that prefix's model state like a few-shot block's, and
    ``kifqa model warm`` computes it ahead of time."""
    return ChatRequest(messages=(Message("system", _SYSTEM), Message("user", "?")), max_tokens=4,
                       prefix_key="relations")


class ChoiceError(ValueError):
    """The model's relation choice is not one of the shown option numbers."""


def parse(text: str, shown: Sequence[Option]) -> Option:
    """The option the model's answer numbers."""
    match = re.fullmatch(r"\s*(\d+)\s*\.?\s*", text)
    if match is None or not 1 <= int(match.group(1)) <= len(shown):
        raise ChoiceError(f"expected an option number 1..{len(shown)}, got {text[:100]!r}")
    return shown[int(match.group(1)) - 1]
