"""The batch job on a two-node ``ray.cluster_utils.Cluster`` (tests/ray_cluster.py): LLM actors spread over both
nodes."""

from __future__ import annotations

import sys
from functools import partial

import pyarrow.parquet as pq
import ray

from kifqa.batch import run_job
from kifqa.config import Settings
from kifqa.llm.base import Completion, Usage

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
import test_batch_job as doubles  # noqa: E402

from tests.fakes import FakeLLM  # noqa: E402

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class NodeLLM(FakeLLM):
    """Answers with the id of the node it runs on (it becomes the answers' property)."""

    async def agenerate(self, requests):
        node = ray.get_runtime_context().get_node_id()
        return [Completion(text=node, usage=Usage(prompt_tokens=1)) for _ in requests]


def test_two_nodes_one_llm_actor_each(two_nodes, tmp_path):
    flags = tmp_path / "flags"
    flags.mkdir()
    settings = Settings(cache_dir=tmp_path / "cache")
    settings = settings.model_copy(update={"batch": settings.batch.model_copy(update={
        "shard_size": 5, "llm_actors": 2, "kb_actors": 2})})
    out = tmp_path / "out"
    summary = run_job(settings, doubles._corpus(tmp_path, 40), out, progress=False,
                      **doubles.fakes(flags) | {"open_llm": partial(NodeLLM, delay=0)})

    assert summary.ok and summary.answered == 40 and summary.shards == 8
    traces = pq.read_table(out / "traces", columns=["question_id"])["question_id"].to_pylist()
    assert sorted(traces) == sorted(f"q{i}" for i in range(40))
    nodes = set(pq.read_table(out / "answers", columns=["property"])["property"].to_pylist())
    assert nodes == {n["NodeID"] for n in ray.nodes() if n["Alive"]} and len(nodes) == 2
