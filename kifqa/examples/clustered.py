"""Few-shot blocks that many questions share: one block of examples per cluster of the pool.

Per-question retrieved examples make every prompt different after the system prompt, so a prefix
cache serves almost nothing. Here the pool's questions are clustered (spherical k-means over the
same sentence embeddings retrieval uses); each cluster gets one block of examples covering the
relations its questions ask about most, and a question gets the block of its nearest cluster, so
all questions of a cluster share one prompt prefix. Optionally the ``nearest`` closest pool examples
follow the block (the question's own part of the prompt).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kifqa.data.pool import Example
from kifqa.examples.embeddings import EmbeddedPool
from kifqa.examples.pool import Pool, as_pool
from kifqa.examples.sources import ExampleSource


class ClusteredExamples(ExampleSource):
    """A shared block per cluster of the pool, then ``nearest`` examples closest to the question.

    Args:
        pool: The example pool.
        clusters: Number of k-means clusters (blocks).
        block: Examples per block.
        nearest: Examples closest to the question appended after the block (not shared).
        cache_dir: Where the pool's embeddings are cached.
        seed: Seed of the k-means initialisation (the blocks are deterministic).
    """

    pool: EmbeddedPool

    def __init__(self, pool: Pool | Sequence[Example], *, clusters: int = 32, block: int = 8, nearest: int = 0,
                 cache_dir: Path | None = None, seed: int = 0) -> None:
        self.origin = as_pool(pool)
        self.pool = EmbeddedPool(list(self.origin.examples), cache_dir=cache_dir)
        self.nearest = nearest
        self.centroids, self.labels, self.blocks = _clustering(self.pool, min(clusters, len(self.pool.examples)),
                                                               block=block, seed=seed, cache_dir=cache_dir)

    def cluster(self, question: str) -> int:
        """The cluster whose centroid is closest to ``question``."""
        return int(np.argmax(self.centroids @ self.pool.embed(question)))

    def prefix_key(self, question: str) -> str | None:
        return f"cluster-{self.cluster(question)}"

    def shared(self, question: str) -> int:
        return len(self._shown(question))

    def shared_blocks(self) -> dict[str, list[Example]]:
        return {f"cluster-{c}": [self.pool.examples[i] for i in members] for c, members in enumerate(self.blocks)}

    def _shown(self, question: str) -> list[int]:
        """The pool indices of ``question``'s block, the question itself left out."""
        return [i for i in self.blocks[self.cluster(question)] if not self.pool.is_question(i, question)]

    def select(self, question: str) -> list[Example]:
        members = self.blocks[self.cluster(question)]
        shown = self._shown(question)
        tail = self.pool.nearest(question, self.nearest, skip=frozenset(members)) if self.nearest else []
        return [self.pool.examples[i] for i in shown] + tail[::-1]


def _clustering(pool: EmbeddedPool, k: int, *, block: int, seed: int,
                cache_dir: Path | None) -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
    """Centroids, each example's cluster and each cluster's block (pool indices), cached in
    ``cache_dir`` by the pool's questions and drafts and the settings: k-means over the whole pool
    takes seconds, which every process that opens the examples (each ``kifqa ask``) would pay."""
    digest = hashlib.sha256(json.dumps([[e.question, e.draft] for e in pool.examples] + [k, block, seed]).encode())
    cache = cache_dir / f"clusters-{digest.hexdigest()[:16]}.npz" if cache_dir else None
    if cache is not None and cache.exists():
        saved = np.load(cache)
        return saved["centroids"], saved["labels"], [[int(i) for i in row if i >= 0] for row in saved["blocks"]]
    centroids, labels = spherical_kmeans(pool.matrix, k, seed=seed)
    blocks = [block_of(pool.matrix, np.flatnonzero(labels == c), centroids[c], pool.examples, size=block)
              for c in range(len(centroids))]
    if cache is not None:
        padded = np.full((len(blocks), max(map(len, blocks), default=0)), -1, dtype=np.int64)
        for c, members in enumerate(blocks):
            padded[c, :len(members)] = members
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, centroids=centroids, labels=labels, blocks=padded)
        tmp.replace(cache)
    return centroids, labels, blocks


def block_of(matrix: np.ndarray, members: np.ndarray, centroid: np.ndarray, pool: list[Example], *,
             size: int) -> list[int]:
    """Pool indices of one cluster's block: the member closest to the centroid for each of the
    cluster's most frequent relations (predicate and direction), taking further members of those
    relations in turn when there are fewer relations than ``size``; the most frequent last (next to
    the question)."""
    closeness = matrix[members] @ centroid
    by_relation: dict[tuple[str, bool], list[int]] = defaultdict(list)
    for i in members[np.argsort(-closeness)]:
        by_relation[pool[i].relation()].append(int(i))
    groups = sorted(by_relation.values(), key=len, reverse=True)
    chosen: list[int] = []
    for turn in range(max(map(len, groups), default=0)):
        chosen += [g[turn] for g in groups if len(g) > turn][: size - len(chosen)]
        if len(chosen) >= size:
            break
    return chosen[::-1]


def spherical_kmeans(x: np.ndarray, k: int, *, seed: int = 0, iterations: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """Unit-length centroids and each row's cluster for unit-length rows ``x`` (cosine k-means,
    k-means++ initialisation)."""
    rng = np.random.default_rng(seed)
    centers = [x[rng.integers(len(x))]]
    distance = np.maximum(1.0 - x @ centers[0], 0.0)
    for _ in range(1, k):
        total = distance.sum()
        pick = rng.choice(len(x), p=distance / total) if total > 0 else rng.integers(len(x))
        centers.append(x[pick])
        distance = np.minimum(distance, np.maximum(1.0 - x @ x[pick], 0.0))
    c = np.stack(centers)
    labels = np.argmax(x @ c.T, axis=1)
    for _ in range(iterations):
        sums = np.eye(k, dtype=x.dtype)[labels].T @ x
        norms = np.linalg.norm(sums, axis=1)
        filled = norms > 0
        c[filled] = sums[filled] / norms[filled, None]
        new = np.argmax(x @ c.T, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
    return c, labels
