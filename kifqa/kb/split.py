"""WDQS's graph split: since 2025 scholarly articles live on their own host (``query-scholarly.wikidata.org``), and
an article's statements are only there. :class:`ScholarlySplit` asks the main graph first and the scholarly one only
for an entity the main graph has no statements about."""

from __future__ import annotations

from typing import Any

from kifqa.kb.base import EntityProperties, FilterResult, KnowledgeBase
from kifqa.kb.guard import RequestGate
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.types import Candidate, Direction


class ScholarlySplit(KnowledgeBase):
    """``main`` for everything; ``scholarly`` for ``properties_of`` and ``facts`` of an entity on which ``main``
    has no statement at all (so an entity of the main graph never costs the scholarly host a query)."""

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
        found = await self.main.properties_of(entity)
        return found if found.uses else await self.scholarly.properties_of(entity)

    async def facts(self, entity: str, property: str, direction: Direction) -> FilterResult:
        found = await self.main.facts(entity, property, direction)
        if found.facts or (await self.main.properties_of(entity)).uses:
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
        """The main host's gate (a batch job's shared limit); the scholarly host keeps its own."""
        return self.main.request_gate

    @request_gate.setter
    def request_gate(self, gate: RequestGate | None) -> None:
        self.main.request_gate = gate

    @property
    def search_gate(self) -> RequestGate | None:
        """The search's gate (the main base's search; the scholarly one searches nothing)."""
        return self.main.search_gate

    @search_gate.setter
    def search_gate(self, gate: RequestGate | None) -> None:
        self.main.search_gate = gate
