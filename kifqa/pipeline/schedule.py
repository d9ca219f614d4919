"""Answering a question set: questions that share a few-shot block go together.

:func:`prefix_groups` groups questions by the block of their examples; :func:`in_prefix_order` puts
each group's questions one after another (what a batch task sends to its LLM actor); :func:`answer_all`
answers in-process on lanes that each take one share of a block (:func:`block_shares`) after another.
Answered in these orders, a backend with prefix caching evaluates each block once per share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from kifqa.examples.sources import ExampleSource
from kifqa.types import Question, Result


class Answerer(Protocol):
    """What answers questions one at a time: a :class:`~kifqa.pipeline.Pipeline` or a stand-in of it."""

    examples: ExampleSource

    def prepare(self, questions: list[Question]) -> None: ...

    async def answer(self, question: Question) -> Result: ...


def prefix_groups(examples: ExampleSource, questions: list[Question]) -> list[list[Question]]:
    """``questions`` grouped by few-shot block (each group in the place of its first question,
    input order within it; a question without a shared block is a group of its own). Prepared
    questions (:meth:`Answerer.prepare`) are grouped without encoding them one by one."""
    groups: dict[object, list[Question]] = {}
    for i, q in enumerate(questions):
        groups.setdefault(examples.prefix_key(q.text) or (None, i), []).append(q)
    return list(groups.values())


def in_prefix_order(examples: ExampleSource, questions: list[Question]) -> list[Question]:
    """``questions`` reordered so that those sharing a few-shot block follow one another: answered
    in this order on one model instance, a block is evaluated once and then served by the prefix
    cache."""
    return [q for group in prefix_groups(examples, questions) for q in group]


def block_shares(groups: list[list[Question]], *, lanes: int) -> list[list[Question]]:
    """The groups cut into shares of at most half a lane's fair part (so that the lanes finish
    together), biggest first."""
    size = max(1, -(-sum(map(len, groups)) // (2 * lanes)))
    shares = [g[i:i + size] for g in groups for i in range(0, len(g), size)]
    return sorted(shares, key=len, reverse=True)


async def answer_all(pipeline: Answerer, questions: list[Question], *, concurrency: int = 1,
                     progress: Callable[[Result], None] | None = None) -> list[Result]:
    """Answers ``questions`` in-process on ``concurrency`` lanes and returns the results in input order.

    Each lane answers one share of a few-shot block's questions after another
    (:func:`block_shares`), so the questions in flight at once mostly use different blocks: llama.cpp
    gives each lane's next prompt the slot that holds its block, and a block is evaluated once per
    share instead of once per slot."""
    lanes = max(1, concurrency)
    pipeline.prepare(questions)
    shares = block_shares(prefix_groups(pipeline.examples, questions), lanes=lanes)
    done: dict[int, Result] = {}

    async def lane() -> None:
        while shares:
            for q in shares.pop(0):
                done[id(q)] = result = await pipeline.answer(q)
                if progress is not None:
                    progress(result)

    await asyncio.gather(*(lane() for _ in range(min(lanes, len(shares)))))
    return [done[id(q)] for q in questions]
