"""The default examples through the pipeline and the real 0.5B model: the questions of a cluster send
the cluster's block as a shared prompt prefix, and llama.cpp's prefix cache serves it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kifqa.config import ExamplesSettings, Settings
from kifqa.llm import open_llm
from kifqa.llm.base import LLM, ChatRequest, Completion
from kifqa.pipeline import Pipeline
from kifqa.pipeline.schedule import in_prefix_order
from kifqa.types import Question
from tests.fakes import RELATION_TURN

QUESTIONS = ["where was james brown born", "what is a film directed by ridley scott",
             "where was the painter frida kahlo born", "where was the musician frank zappa born",
             "what genre is the album abbey road"]


class Capturing(LLM):
    """The real model, keeping each request and its completion."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.identity = llm.identity
        self.seen: list[tuple[ChatRequest, Completion]] = []

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        done = await self.llm.agenerate(requests)
        self.seen += zip(requests, done, strict=True)
        return done

    async def aclose(self) -> None:
        await self.llm.aclose()


def test_the_default_examples_are_clustered() -> None:
    assert ExamplesSettings().mode == "clustered"


def test_a_cluster_shares_its_block_and_the_prefix_cache_serves_it(settings: Settings, local_kb) -> None:
    s = settings.model_copy(update={
        "examples": ExamplesSettings(mode="clustered", clusters=4, block=4, pool_limit=300),
        "llm": settings.llm.model_copy(update={"model": "qwen2.5-coder-0.5b", "cache": None})})
    llm = Capturing(open_llm(s))
    pipeline = Pipeline.from_settings(kb=local_kb, llm=llm, settings=s)
    keys = [pipeline.examples.prefix_key(q) for q in QUESTIONS]
    first = next(i for i, k in enumerate(keys) if keys.count(k) > 1)
    second = keys.index(keys[first], first + 1)
    other = next(i for i, k in enumerate(keys) if k != keys[first])
    asked = [Question(str(i), QUESTIONS[i]) for i in (first, other, second)]
    assert [q.id for q in in_prefix_order(pipeline.examples, asked)] == [str(first), str(second), str(other)]

    async def run() -> None:
        try:
            for q in in_prefix_order(pipeline.examples, asked):
                await pipeline.answer(q)
        finally:
            await llm.aclose()

    asyncio.run(run())
    drafts = {r.messages[-1].content: (r, c) for r, c in llm.seen if not r.messages[-1].content.startswith(RELATION_TURN)}
    (a, _), (b, done) = drafts[QUESTIONS[first]], drafts[QUESTIONS[second]]
    assert a.prefix_key == b.prefix_key == keys[first]
    assert a.messages[:-1] == b.messages[:-1] and len(a.messages) == 1 + 2 * 4 + 1  # system, block, question
    assert done.ok and done.usage.cached_prompt_tokens >= 0.8 * done.usage.prompt_tokens  # the block was served


class Slow(LLM):
    """The gold model, answering after a pause, recording which draft requests were in flight together."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.identity = llm.identity
        self.running: list[str] = []
        self.together: list[tuple[str, ...]] = []

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        drafts = [r.messages[-1].content for r in requests if not r.messages[-1].content.startswith(RELATION_TURN)]
        self.running += drafts
        self.together.append(tuple(self.running))
        await asyncio.sleep(0.02)
        for d in drafts:
            self.running.remove(d)
        return await self.llm.agenerate(requests)

    async def aclose(self) -> None:
        await self.llm.aclose()


def test_lanes_answer_each_share_of_a_block_in_turn_and_keep_the_input_order(settings: Settings, local_kb) -> None:
    from kifqa.eval.datasets import load_gold
    from kifqa.pipeline.schedule import answer_all, block_shares, prefix_groups

    s = settings.override(examples={"mode": "clustered", "clusters": 4, "block": 4, "pool_limit": 300},
                          llm={"backend": "gold"})
    llm = Slow(open_llm(s))
    pipeline = Pipeline.from_settings(kb=local_kb, llm=llm, settings=s)
    asked = [Question(q.id, q.text) for q in load_gold("sqwd:valid", s.data_dir, start=200, limit=16)]
    shares = block_shares(prefix_groups(pipeline.examples, asked), lanes=3)
    share_of = {q.text: n for n, share in enumerate(shares) for q in share}
    assert len(shares) > 3 and all(len({pipeline.examples.prefix_key(q.text) for q in sh}) == 1 for sh in shares)

    results = asyncio.run(answer_all(pipeline, asked, concurrency=3))
    assert [r.question.id for r in results] == [q.id for q in asked]
    assert all(r.trace.error is None for r in results)
    assert max(map(len, llm.together)) == 3  # three lanes busy at once ...
    for together in llm.together:  # ... each on a share of its own
        assert len({share_of[text] for text in together}) == len(together)
