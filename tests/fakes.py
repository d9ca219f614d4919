"""The tests' shared doubles: a model scripted by pipeline step, and a knowledge base and a model for
the batch job's plumbing. They implement kifqa's own :class:`LLM` and :class:`KnowledgeBase`
interfaces; tests that hand them to Ray register this module to be pickled by value."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Mapping, Sequence

from kifqa.config import Settings
from kifqa.kb.base import EntityProperties, FilterResult, KnowledgeBase
from kifqa.llm.base import LLM, ChatRequest, Completion, Usage
from kifqa.types import Candidate, Fact

#: How a relation request's last turn starts (``kifqa.pipeline.relations.request``); a draft's is the question.
RELATION_TURN = "Question: "


class ScriptedLLM(LLM):
    """A model scripted by pipeline step, keyed by question.

    The draft request of a question gets ``drafts[question]`` if the question is there, else ``draft``
    with ``{q}`` replaced by the question's first 30 characters; a draft of ``None`` fails the request.
    The relation request gets ``picks[question]``, else ``pick``. Every answer reports ``usage``.
    """

    def __init__(self, drafts: Mapping[str, str | None] | None = None, *, draft: str | None = None,
                 picks: Mapping[str, str] | None = None, pick: str = "1", usage: Usage | None = None,
                 identity: str = "scripted") -> None:
        self.drafts = dict(drafts or {})
        self.draft = draft
        self.picks = dict(picks or {})
        self.pick = pick
        self.usage = usage or Usage()
        self.identity = identity

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        return [self._answer(r.messages[-1].content) for r in requests]

    def _answer(self, turn: str) -> Completion:
        if turn.startswith(RELATION_TURN):
            question = turn.split("\n", 1)[0].removeprefix(RELATION_TURN)
            return Completion(self.picks.get(question, self.pick), self.usage)
        text = self.drafts[turn] if turn in self.drafts else (
            self.draft.replace("{q}", turn[:30]) if self.draft is not None else None)
        return Completion(error="scripted failure") if text is None else Completion(text, self.usage)


class FakeKB(KnowledgeBase):
    """Every entity is born in Q1; a call optionally logs its start and end to a file."""

    def __init__(self, spec: str, settings: Settings, *, log: str | None = None) -> None:
        self.spec = spec
        self.log = log

    async def _io(self) -> None:
        start = time.time()
        await asyncio.sleep(0.02 if self.log else 0.001)
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"{start} {time.time()}\n")

    async def search_entities(self, text: str, *, limit: int = 10) -> list[Candidate]:
        await self._io()
        return [Candidate(id=f"Q{zlib.crc32(text.encode())}", label=text)]

    async def search_properties(self, text: str, *, limit: int = 10) -> list[Candidate]:
        return []

    async def properties_of(self, entity: str) -> EntityProperties:
        return EntityProperties(uses=())

    async def facts(self, entity: str, property: str, direction: str) -> FilterResult:
        await self._io()
        return FilterResult(facts=(Fact(subject=entity, subject_label="e", property=property, property_label="born in", value="Q1", value_label="one"),), filter="f")

    async def labels(self, ids: list[str]) -> dict[str, str]:
        return {}


class FakeLLM(LLM):
    """Answers ``P19`` to every request after ``delay`` seconds (the batch job's model double)."""

    identity = "fake-llm"

    def __init__(self, settings: Settings, *, delay: float = 0.002) -> None:
        self.delay = delay

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        await asyncio.sleep(self.delay)
        return [Completion(text="P19", usage=Usage(prompt_tokens=10, completion_tokens=2)) for _ in requests]
