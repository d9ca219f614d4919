"""A question's nearest pool examples and precedent votes do not depend on the questions encoded and scored with
it: with the real encoder and a real pool, each question alone gets what it gets inside a batch of 64."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kifqa.data.pool import Example, sqwd_pool
from kifqa.examples.embeddings import NOISE, EmbeddedPool
from kifqa.examples.encoder import load_encoder
from kifqa.examples.precedents import Precedents
from kifqa.examples.text import masked
from kifqa.examples.vectors import memo
from tests.conftest import TEST_CACHE

K = 20
BATCH = 64


@pytest.fixture(scope="module")
def precedents(data_dir: Path) -> Precedents:
    """Votes over the first 2000 train questions (both pools embedded once for the test run, in its cache)."""
    return Precedents(EmbeddedPool(sqwd_pool(data_dir, limit=2000), cache_dir=TEST_CACHE / "examples"))


@pytest.fixture(scope="module")
def asked(data_dir: Path) -> list[tuple[str, str]]:
    """128 valid questions with their gold entity, as the draft would name it."""
    return [(e.question, e.known()) for e in sqwd_pool(data_dir, split="valid", limit=128)]


def fresh() -> None:
    """Forgets the process's embeddings, so that the next texts are encoded with the others asked with them."""
    memo.cache_clear()


def in_batches(asked: list[tuple[str, str]], count: Callable[[list[tuple[str, str]]], list[Any]]) -> list[Any]:
    """``count`` of ``asked`` 64 at a time, each batch's texts encoded together."""
    out: list[Any] = []
    for start in range(0, len(asked), BATCH):
        fresh()
        out += count(asked[start:start + BATCH])
    return out


def alone(asked: list[tuple[str, str]], count: Callable[[list[tuple[str, str]]], list[Any]]) -> list[Any]:
    """``count`` of each of ``asked`` on its own, its texts encoded alone."""
    out: list[Any] = []
    for one in asked:
        fresh()
        out += count([one])
    return out


def near_ties(pool: EmbeddedPool, texts: list[str]) -> int:
    """How many of ``texts`` have two of their first K + 1 neighbours within twice :data:`NOISE` of each other
    (by float32 cosine with their encoding alone), other than repeated rows: where a batch's rounding can reorder
    them."""
    count = 0
    for text in texts:
        scores = pool.matrix @ load_encoder().encode([text])[0]
        top = np.argsort(-scores, kind="stable")[:K + 1]
        close = np.flatnonzero(scores[top[:-1]] - scores[top[1:]] < 2 * NOISE)
        count += any(not np.array_equal(pool.matrix[top[i]], pool.matrix[top[i + 1]]) for i in close)
    return count


def test_the_nearest_examples_alone_are_those_inside_a_batch(precedents: Precedents, asked) -> None:
    pool, hidden = precedents._plain, precedents._pool
    questions = [q for q, _ in asked]
    texts = [masked(q, known) or q for q, known in asked]
    assert near_ties(pool, questions) + near_ties(hidden, texts) >= 3, "the questions hold near ties to break"

    def names(lists: list[list[Example]]) -> list[list[str]]:
        return [[e.question for e in examples] for examples in lists]

    def plain(part: list[tuple[str, str]]) -> list[list[Example]]:
        return pool.nearest_many([q for q, _ in part], K)

    def by_mask(part: list[tuple[str, str]]) -> list[list[Example]]:
        return hidden.nearest_many([q for q, _ in part], K, like=[masked(q, known) or q for q, known in part])

    for lists in (plain, by_mask):
        together, one_by_one = names(in_batches(asked, lists)), names(alone(asked, lists))
        assert [i for i, (a, b) in enumerate(zip(one_by_one, together)) if a != b] == []
    fresh()
    assert names([pool.nearest(q, K) for q in questions[:BATCH]]) == names(plain(asked[:BATCH]))


def test_the_votes_alone_are_those_inside_a_batch(precedents: Precedents, asked) -> None:
    def count(part: list[tuple[str, str]]) -> list[Any]:
        return precedents.count(part, K)

    together, one_by_one = in_batches(asked, count), alone(asked, count)
    assert [i for i, (a, b) in enumerate(zip(one_by_one, together)) if a != b] == []
    assert [list(v) for v in one_by_one] == [list(v) for v in together], "in the same order"
