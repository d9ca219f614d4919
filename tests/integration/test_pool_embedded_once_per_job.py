"""A job embeds the example pool once, on the driver, and hands the embeddings to its shard tasks through the
object store: a task on a node whose cache lacks them saves them there instead of encoding the pool (minutes of
the CPU a GPU node's model server needs)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import ray

from kifqa.batch import run_job
from kifqa.batch.task import save_pool_embeddings
from kifqa.config import ExamplesSettings, Settings
from kifqa.data.pool import Example
from kifqa.examples import embeddings

sys.path.insert(0, str(Path(__file__).parent))
import test_batch_job as doubles  # noqa: E402

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: What the encoder's progress bar says in a worker's log when a task encodes the pool.
ENCODING = "embedding the example pool"


def _worker_logs() -> str:
    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    return "".join(p.read_text(errors="replace") for p in logs.glob("worker-*.err"))


def test_the_job_encodes_the_pool_once_and_its_tasks_none(two_nodes, data_dir, tmp_path):
    settings = Settings(data_dir=data_dir, cache_dir=tmp_path / "cache",
                        examples=ExamplesSettings(mode="retrieved", pool_limit=30))
    settings = settings.model_copy(update={"batch": settings.batch.model_copy(update={
        "shard_size": 5, "llm_actors": 2, "kb_actors": 2})})
    fakes = doubles.fakes(tmp_path)
    before = embeddings.pool_encodings()

    summary = run_job(settings, doubles._corpus(tmp_path, 20), tmp_path / "out", progress=False,
                      open_kb=fakes["open_kb"], open_llm=fakes["open_llm"])

    assert summary.shards == 4 and summary.questions == 20
    # The plain pool and, for the precedent votes, the masked one: each once, here.
    assert embeddings.pool_encodings() - before == 2
    assert ENCODING not in _worker_logs()


def test_a_node_without_the_cache_file_saves_the_shipped_embeddings(two_nodes, tmp_path):
    pool = [Example(f"who wrote book number {i}", f"(book {i} | author | ?x)") for i in range(6)]
    driver = embeddings.EmbeddedPool(pool, cache_dir=tmp_path / "driver")
    name = driver.cache_file.name
    node = tmp_path / "node"
    before = embeddings.pool_encodings()

    save_pool_embeddings(node, ((name, ray.put(driver.matrix)),))

    assert np.array_equal(embeddings.EmbeddedPool(pool, cache_dir=node).matrix, driver.matrix)
    assert embeddings.pool_encodings() == before
