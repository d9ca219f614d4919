"""The coalescer answers each lookup apart: whatever a batch's run raises costs only the lookup that caused it."""

from __future__ import annotations

import asyncio

import pytest

from kifqa.kb.coalesce import Coalescer


def test_an_exception_in_a_batch_fails_only_the_lookup_that_caused_it() -> None:
    runs: list[list[int]] = []

    async def run(group: str, args: list[int]) -> list[int | BaseException]:
        runs.append(args)
        if 13 in args:
            raise ValueError("13 cannot be serialized")
        return [a * 2 for a in args]

    async def main() -> list[int | BaseException]:
        coalescer: Coalescer[str, int, int] = Coalescer(run, size=64, wait_s=0.01)
        return await asyncio.gather(*(coalescer.lookup("g", i) for i in range(50)), return_exceptions=True)

    results = asyncio.run(main())
    failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
    assert failed == [13] and isinstance(results[13], ValueError)
    assert results[:13] == [i * 2 for i in range(13)] and results[14:] == [i * 2 for i in range(14, 50)]
    assert runs[0] == list(range(50)), "the lookups were first asked in one batch"


def test_a_cancelled_batch_reaches_every_caller() -> None:
    async def run(group: str, args: list[int]) -> list[int | BaseException]:
        raise asyncio.CancelledError

    async def main() -> None:
        coalescer: Coalescer[str, int, int] = Coalescer(run, size=2, wait_s=0.01)
        await asyncio.gather(coalescer.lookup("g", 1), coalescer.lookup("g", 2))

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
