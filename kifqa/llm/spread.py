"""``SpreadLLM``: several in-process model instances behind one :class:`LLM`, one core each.

llama.cpp's calls release the GIL, so in-process commands (``kifqa eval``, ``silver``, ``bench
examples``) use every core the way the batch job's actors do: requests sharing a prompt prefix go to
the instance the prefix hashes to (its slots keep that block), the others to the least busy one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kifqa.llm.base import LLM, ChatRequest, Completion
from kifqa.llm.blockstate import BlockStats
from kifqa.llm.routing import LeastLoaded


class SpreadLLM(LLM):
    """Forwards each batch of requests to one of ``members`` (all the same model)."""

    def __init__(self, members: list[LLM]) -> None:
        self.members = members
        self.identity = members[0].identity
        self._pool = LeastLoaded(members)

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        with self._pool.pick(requests[0].prefix_key if requests else None) as member:
            return await member.agenerate(requests)

    def blocks(self) -> BlockStats | None:
        return BlockStats.total(m.blocks() for m in self.members)

    async def aload(self) -> None:
        await asyncio.gather(*(m.aload() for m in self.members))

    async def aclose(self) -> None:
        await asyncio.gather(*(m.aclose() for m in self.members))
