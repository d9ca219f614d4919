"""Step 3: the properties the kept entities really have; the one that fits the draft is chosen."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from importlib import resources

from kifqa.kb.base import KnowledgeBase, PropertyUse
from kifqa.llm.base import ChatRequest, Message
from kifqa.pipeline.entities import Linking
from kifqa.pipeline.text import ALIAS_MATCH, similarity
from kifqa.types import UNKNOWN, Candidate, ChoiceOption, Direction, Pattern, Relation, RelationChoice

_SYSTEM = resources.files("kifqa.pipeline").joinpath("prompts/choose_system.txt").read_text().strip()


@dataclass(frozen=True)
class Option:
    """A way to answer: a property in one direction, for a group of entities that share it."""

    entities: tuple[Candidate, ...]
    property: Candidate
    direction: Direction
    #: How well the property names the draft's predicate (:func:`similarity`).
    match: float
    #: ``match`` adjusted for direction and entity rank: the order options are shown in.
    score: float

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


async def uses(kb: KnowledgeBase, entities: list[Candidate]) -> dict[str, list[PropertyUse]]:
    """Each entity's real properties with their direction, fetched concurrently."""
    found = await asyncio.gather(*(kb.properties_of(e.id) for e in entities))
    return {e.id: list(p.uses) for e, p in zip(entities, found)}


def options(pattern: Pattern, linking: Linking, by_entity: dict[str, list[PropertyUse]]) -> list[Option]:
    """The ways to answer, best first by how well the property names the draft's predicate (and
    whether its direction agrees with the draft). Exactly-named entities share one option per
    (property, direction); near matches get options of their own, and the search's order among
    them breaks ties (the better-named entity first)."""
    groups: dict[tuple, tuple[list[Candidate], PropertyUse]] = {}
    rank = {e.id: i for i, e in enumerate(linking.kept)}
    for entity in linking.kept:
        for use in by_entity.get(entity.id, []):
            key = (use.property.id, use.direction) if linking.exact else (entity.id, use.property.id, use.direction)
            members, _ = groups.setdefault(key, ([], use))
            members.append(entity)
    out = []
    for members, use in groups.values():
        match = similarity(pattern.predicate, use.property.label, use.property.aliases)
        score = match + (0.05 if use.direction == pattern.direction else 0.0)
        score -= 0.0 if linking.exact else 0.01 * rank[members[0].id]
        out.append(Option(tuple(members), use.property, use.direction, match, score))
    out.sort(key=lambda o: -o.score)
    return out


def obvious(ranked: list[Option]) -> Option | None:
    """The option to take without asking the model: the only one, or the best of those whose
    property the draft's predicate names exactly, when it is strictly best (a label beats an
    alias; then the draft's direction, then the search's order of near-match entities)."""
    if len(ranked) == 1:
        return ranked[0]
    exact = [o for o in ranked if o.match >= ALIAS_MATCH]
    if len(exact) == 1 or (exact and exact[0].score > exact[1].score):
        return exact[0]
    return None


def request(question: str, pattern: Pattern, shown: list[Option]) -> ChatRequest:
    """Asks the model for one option's number (the grammar admits only the shown numbers)."""
    user = str(RelationChoice(question, pattern, tuple(o.shown() for o in shown)))
    numbers = " | ".join(f'"{i}"' for i in range(1, len(shown) + 1))
    return ChatRequest(
        messages=(Message("system", _SYSTEM), Message("user", user)),
        grammar=f"root ::= {numbers}",
        max_tokens=4,
    )


class ChoiceError(ValueError):
    """The model's relation choice is not one of the shown option numbers."""


def parse(text: str, shown: list[Option]) -> Option:
    match = re.fullmatch(r"\s*(\d+)\s*\.?\s*", text)
    if match is None or not 1 <= int(match.group(1)) <= len(shown):
        raise ChoiceError(f"expected an option number 1..{len(shown)}, got {text[:100]!r}")
    return shown[int(match.group(1)) - 1]
