"""WDQS's graph split: since 2025 scholarly articles live on their own host (``query-scholarly.wikidata.org``), and
an article's statements (those whose subject is an article) are only there. :class:`ScholarlySplit` takes an
entity's own statements from the main graph, or from the scholarly one where the main graph has none; and the
statements that point at an entity from both graphs, since an article's statement may point at any entity (its
author, its main subject)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from kifqa.kb.base import EntityProperties, FilterResult, KnowledgeBase
from kifqa.kb.guard import RequestGate
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.types import Candidate, Direction


class ScholarlySplit(KnowledgeBase):
    """``main`` for search, labels and names. An entity's statements forward from ``main``, or from ``scholarly``
    where ``main`` has none of them (so a main entity's forward lookups never cost the scholarly host a query);
    backward from both (articles point at entities of either graph)."""

    def __init__(self, main: KifKnowledgeBase, scholarly: KifKnowledgeBase) -> None:
        self.main = main
        self.scholarly = scholarly
        self.spec = main.spec
        self.build = main.build

    async def search_entities(self, text: str, *, limit: int = 10) -> list[Candidate]:
        return await self.main.search_entities(text, limit=limit)

    async def search_properties(self, text: str, *, limit: int = 10) -> list[Candidate]:
        return await self.main.search_properties(text, limit=limit)

    async def properties_of(self, entity: str) -> EntityProperties:
        main, articles = await asyncio.gather(self.main.properties_of(entity), self.scholarly.properties_of(entity))
        backward = [u for u in main.uses if u.direction == "backward"]
        known = {u.property.id for u in backward}
        backward += [u for u in articles.uses if u.direction == "backward" and u.property.id not in known]
        own = main if _has_forward(main) else articles
        forward = [u for u in own.uses if u.direction == "forward"]
        return EntityProperties(uses=(*backward, *forward), truncated=main.truncated or articles.truncated)

    async def facts(self, entity: str, property: str, direction: Direction) -> FilterResult:
        if direction == "backward":
            main, articles = await asyncio.gather(self.main.facts(entity, property, direction),
                                                  self.scholarly.facts(entity, property, direction))
            known = set(main.facts)
            more = tuple(f for f in articles.facts if f not in known)
            return dataclasses.replace(main, facts=main.facts + more, truncated=main.truncated or articles.truncated)
        found = await self.main.facts(entity, property, direction)
        if found.facts or _has_forward(await self.main.properties_of(entity)):
            return found
        return await self.scholarly.facts(entity, property, direction)

    async def labels(self, ids: list[str]) -> dict[str, str]:
        return await self.main.labels(ids)

    async def named(self, texts: list[str]) -> list[str] | None:
        return await self.main.named(texts)

    async def select(self, query: str) -> dict[str, Any]:
        return await self.main.select(query)

    async def aclose(self) -> None:
        try:
            await self.main.aclose()
        finally:
            await self.scholarly.aclose()

    @property
    def request_gate(self) -> RequestGate | None:
        """The main host's gate (a batch job's shared limit; the scholarly host's is :attr:`scholarly_gate`)."""
        return self.main.request_gate

    @request_gate.setter
    def request_gate(self, gate: RequestGate | None) -> None:
        self.main.request_gate = gate

    @property
    def scholarly_gate(self) -> RequestGate | None:
        """The scholarly host's gate: its own limit in process, a batch job's limit shared by its KB actors."""
        return self.scholarly.request_gate

    @scholarly_gate.setter
    def scholarly_gate(self, gate: RequestGate | None) -> None:
        self.scholarly.request_gate = gate

    @property
    def search_gate(self) -> RequestGate | None:
        """The search's gate (the main base's search; the scholarly one searches nothing)."""
        return self.main.search_gate

    @search_gate.setter
    def search_gate(self, gate: RequestGate | None) -> None:
        self.main.search_gate = gate


def _has_forward(found: EntityProperties) -> bool:
    """Whether the graph that gave ``found`` holds statements of the entity's own (it is that graph's entity)."""
    return any(u.direction == "forward" for u in found.uses)
