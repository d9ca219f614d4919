"""Per-question bookkeeping: step timings, the failing step, counted KB calls and LLM calls."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from kifqa.kb.base import EntityProperties, FilterResult, Hits, KnowledgeBase
from kifqa.llm.base import LLM, ChatRequest, Completion
from kifqa.types import Candidate, Direction, LLMCall, Trace, clipped


class Recorder:
    """Fills a :class:`Trace` while one question runs."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.current_step = "input"

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Times a step; an exception escaping it is attributed to it (a step inside another gives the
        outer one back when it ends)."""
        outer, self.current_step = self.current_step, name
        start = time.perf_counter()
        try:
            yield
        finally:
            self.trace.timings[name] = round(time.perf_counter() - start, 6)
        self.current_step = outer

    async def generate(self, llm: LLM, request: ChatRequest) -> Completion:
        """One model call, recorded in the trace under the current step."""
        [completion] = await llm.agenerate([request])
        u, lp = completion.usage, completion.logprobs
        self.trace.llm_calls.append(LLMCall(
            step=self.current_step, prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
            cached_prompt_tokens=u.cached_prompt_tokens, latency_s=u.latency_s, cache_hit=u.cache_hit,
            output=clipped(completion.text), error=None if completion.error is None else clipped(completion.error),
            logprob=round(sum(lp), 6) if lp else None, min_logprob=round(min(lp), 6) if lp else None,
            mean_logprob=round(sum(lp) / len(lp), 6) if lp else None))
        return completion


class CountingKB(KnowledgeBase):
    """Passes calls through to a knowledge base, counting them in a trace."""

    def __init__(self, kb: KnowledgeBase, trace: Trace) -> None:
        self._kb = kb
        self._trace = trace
        self.spec = kb.spec
        #: Whether each text this question asked of :meth:`named` is a name (the widened name and a second
        #: draft ask again).
        self._named: dict[str, bool] = {}

    async def search_entities(self, text: str, *, limit: int = 10) -> list[Candidate]:
        self._trace.kb_calls += 1
        return self._noted(text, await self._kb.search_entities(text, limit=limit))

    async def search_properties(self, text: str, *, limit: int = 10) -> list[Candidate]:
        self._trace.kb_calls += 1
        return self._noted(text, await self._kb.search_properties(text, limit=limit))

    def _noted(self, text: str, found: list[Candidate]) -> list[Candidate]:
        """``found``, each search that failed on the way (:class:`~kifqa.kb.base.Hits`) noted in the trace."""
        if isinstance(found, Hits):
            self._trace.notes.extend(f"search {text!r}: {clipped(failure)}" for failure in found.failed)
        return found

    async def properties_of(self, entity: str) -> EntityProperties:
        self._trace.kb_calls += 1
        found = await self._kb.properties_of(entity)
        if found.truncated:
            self._trace.notes.append(f"properties of {entity}: more distinct properties than kb.max_results "
                                     "in a direction; the rest are left out")
        return found

    async def facts(self, entity: str, property: str, direction: Direction) -> FilterResult:
        self._trace.kb_calls += 1
        return await self._kb.facts(entity, property, direction)

    async def labels(self, ids: list[str]) -> dict[str, str]:
        self._trace.kb_calls += 1
        return await self._kb.labels(ids)

    async def named(self, texts: list[str]) -> list[str] | None:
        """Asks only the texts this question has not asked before."""
        texts = list(dict.fromkeys(texts))
        if missing := [t for t in texts if t not in self._named]:
            self._trace.kb_calls += 1
            found = await self._kb.named(missing)
            if found is None:
                return None
            names = set(found)
            self._named.update((t, t in names) for t in missing)
        return [t for t in texts if self._named[t]]
