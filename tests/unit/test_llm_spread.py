"""``SpreadLLM``: in-process model instances behind one LLM, a shared prefix staying on one instance."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kifqa.config import Settings
from kifqa.llm import ChatRequest, Completion, Message, open_llm
from kifqa.llm.base import LLM
from kifqa.llm.local import LocalLLM
from kifqa.llm.spread import SpreadLLM


class Member(LLM):
    """Answers with its own name after a pause, so that calls overlap."""

    def __init__(self, name: str) -> None:
        self.identity, self.name, self.closed = "member", name, False

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        await asyncio.sleep(0.01)
        return [Completion(text=self.name) for _ in requests]

    async def aclose(self) -> None:
        self.closed = True


def test_a_blocks_requests_stay_on_one_instance_and_the_rest_spread() -> None:
    members = [Member("a"), Member("b")]
    spread = SpreadLLM(members)

    def request(key: str | None) -> list[ChatRequest]:
        return [ChatRequest(messages=(Message("user", "q"),), prefix_key=key)]

    async def main() -> tuple[set[str], set[str]]:
        keyed = await asyncio.gather(*(spread.agenerate(request("cluster-7")) for _ in range(3)))
        free = await asyncio.gather(*(spread.agenerate(request(None)) for _ in range(4)))
        await spread.aclose()
        return {c[0].text for c in keyed}, {c[0].text for c in free}

    keyed, free = asyncio.run(main())
    assert len(keyed) == 1 and free == {"a", "b"}
    assert all(m.closed for m in members)


def test_open_llm_opens_the_instances_it_is_asked_for() -> None:
    spread = open_llm(Settings(), instances=3)
    assert isinstance(spread, SpreadLLM) and len(spread.members) == 3
    assert all(isinstance(m, LocalLLM) for m in spread.members)  # lazy: nothing is loaded
    assert isinstance(open_llm(Settings()), LocalLLM)
