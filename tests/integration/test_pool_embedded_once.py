"""Shard tasks that start together on one machine embed the example pool once: the first computes it under a
file lock beside the cache file, the others wait and load it (a fresh GPU node starts many tasks at once)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import ray

from kifqa.data.pool import Example
from kifqa.examples import embeddings

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

POOL = [Example(f"who wrote book number {i}", f"(book {i} | author | ?x)") for i in range(12)]
TASKS = 4


def _embed_after_barrier(cache_dir: Path, barrier: Path, index: int) -> tuple[int, list[float]]:
    """Waits until every task is here, then builds the pool: how many pool encodings this task ran."""
    (barrier / str(index)).touch()
    while len(list(barrier.iterdir())) < TASKS:
        time.sleep(0.01)
    before = embeddings.pool_encodings()
    pool = embeddings.EmbeddedPool(POOL, cache_dir=cache_dir)
    return embeddings.pool_encodings() - before, pool.matrix[0][:4].tolist()


@pytest.fixture(scope="module")
def local_ray() -> object:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_tasks_starting_together_on_one_machine_embed_the_pool_once(local_ray: object, tmp_path: Path) -> None:
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    embed = ray.remote(num_cpus=0.1)(_embed_after_barrier)
    results = ray.get([embed.remote(tmp_path / "cache", barrier, i) for i in range(TASKS)], timeout=300)
    assert sum(n for n, _ in results) == 1, results
    assert all(row == results[0][1] for _, row in results)
