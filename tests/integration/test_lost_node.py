"""A worker node lost mid-run, with the corpus and the run folder on an object store (moto's S3 server on
127.0.0.1, ``tests/s3_server.py``): on a three-node ``ray.cluster_utils.Cluster`` one worker node that holds
LLM actors, a KB actor and a running shard task is removed; the job finishes on the other two, every
question is traced once, no answer row is doubled, and the answers are those of a one-node run on local disk.

The model and the knowledge base are doubles that answer each question the same way wherever they run (a
replayed model: its answer is a function of the question), and note on which node they run.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from kifqa.batch import run_job
from kifqa.config import Settings
from kifqa.kb.base import KnowledgeBase
from kifqa.llm.base import LLM, ChatRequest, Completion, Usage
from kifqa.runs import RunFolder
from kifqa.types import Question
from tests.fakes import FakeKB, FakeLLM
from tests.integration.test_batch_job import FakePipeline
from tests.s3_server import S3Server, s3_server

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

N, SHARD = 300, 10


def _note(notes: str, kind: str, what: str = "") -> None:
    """Notes that a ``kind`` runs on this node (a file per note: writers never interleave)."""
    node = ray.get_runtime_context().get_node_id()
    (Path(notes) / f"{kind}.{node}.{uuid.uuid4().hex}").write_text(what)


class ReplayedLLM(FakeLLM):
    """Answers each question with a property of its own (a function of its text), after ``delay``."""

    def __init__(self, settings: Settings, *, delay: float, notes: str) -> None:
        super().__init__(settings, delay=delay)
        _note(notes, "llm")

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        await super().agenerate(requests)
        return [Completion(text=f"P{zlib.crc32(r.messages[-1].content.encode()) % 997}",
                           usage=Usage(prompt_tokens=1, completion_tokens=1)) for r in requests]


class NotedKB(FakeKB):
    def __init__(self, spec: str, settings: Settings, *, notes: str) -> None:
        super().__init__(spec, settings)
        _note(notes, "kb")


class NotedPipeline(FakePipeline):
    """Notes each shard it starts, by its first question's id."""

    def __init__(self, *, kb: KnowledgeBase, llm: LLM, settings: Settings, flags: Path, notes: str) -> None:
        super().__init__(kb=kb, llm=llm, settings=settings, flags=flags)
        self.notes = notes

    def prepare(self, questions: list[Question]) -> None:
        _note(self.notes, "shard", questions[0].id)


def _doubles(tmp_path: Path, delay: float) -> dict:
    notes, flags = tmp_path / "notes", tmp_path / "flags"
    notes.mkdir(exist_ok=True)
    flags.mkdir(exist_ok=True)
    return {"pipeline": partial(NotedPipeline, flags=flags, notes=str(notes)),
            "open_kb": partial(NotedKB, notes=str(notes)),
            "open_llm": partial(ReplayedLLM, delay=delay, notes=str(notes))}


def _settings(tmp_path: Path, **batch: object) -> Settings:
    return Settings(cache_dir=tmp_path / "cache").override(batch={
        "shard_size": SHARD, "kb_placement": "actors", "question_timeout_s": 120.0, **batch})


def _corpus() -> bytes:
    return "".join(json.dumps({"id": f"q{i:03d}", "question": f"where was person {i} born"}) + "\n"
                   for i in range(N)).encode()


def _answers(out: str | Path) -> list[tuple[str, str, str, str]]:
    table = RunFolder(out).read_answers(["question_id", "subject", "property", "answer"])
    return sorted(zip(*(table[c].to_pylist() for c in table.column_names), strict=True))


@pytest.fixture(scope="module")
def one_node_answers(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, str, str]]:
    """The answers of the job on one local node, corpus and run folder on local disk."""
    tmp = tmp_path_factory.mktemp("one-node")
    (tmp / "corpus.jsonl").write_bytes(_corpus())
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        summary = run_job(_settings(tmp, llm_actors=2, kb_actors=1), tmp / "corpus.jsonl", tmp / "out",
                          progress=False, **_doubles(tmp, delay=0.0))
    finally:
        ray.shutdown()
    assert summary.ok and summary.answered == N
    return _answers(tmp / "out")


@pytest.fixture(scope="module")
def three_nodes(one_node_answers: list[tuple[str, str, str, str]]) -> Iterator[tuple[Cluster, S3Server]]:
    """A head without cores (the LLM actors, which need one, go to the workers) and two worker nodes of two
    cores each, started while the S3 server's environment is set."""
    with s3_server() as s3:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        for _ in range(2):
            cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            yield cluster, s3
        finally:
            ray.shutdown()
            cluster.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_lost_worker_node_loses_and_doubles_nothing(
        three_nodes: tuple[Cluster, S3Server], one_node_answers: list[tuple[str, str, str, str]],
        tmp_path: Path) -> None:
    cluster, s3 = three_nodes
    s3.put("corpora/lost.jsonl", _corpus())
    corpus, out = s3.uri("corpora/lost.jsonl"), s3.uri("runs/lost")
    notes = tmp_path / "notes"
    workers = {node.node_id: node for node in cluster.worker_nodes}
    removed: list[str] = []
    seen: list[str] = []

    def running_there(node: str, finished: set[int]) -> bool:
        started = [p.read_text() for p in notes.glob(f"shard.{node}.*")]
        return any(int(qid[1:]) // SHARD not in finished for qid in started)

    def remove_a_worker() -> None:
        deadline = time.time() + 300
        while time.time() < deadline and not removed:
            finished = RunFolder(out).finished()
            if 3 <= len(finished) <= N // SHARD - 10:
                for node in workers:
                    held = {p.name.split(".")[0] for p in notes.glob(f"*.{node}.*")}
                    seen[:] = [f"{len(finished)} shards finished; node {node[:8]} holds {sorted(held)}"]
                    if {"llm", "kb"} <= held and running_there(node, finished):
                        cluster.remove_node(workers[node], allow_graceful=False)
                        removed.append(node)
                        return
            time.sleep(0.1)

    remover = threading.Thread(target=remove_a_worker, daemon=True)
    remover.start()
    summary = run_job(_settings(tmp_path, llm_actors=4, llm_actor_cpus=0.5, kb_actors=3, max_tasks=4), corpus, out,
                      progress=False, **_doubles(tmp_path, delay=0.3))
    remover.join()

    assert removed, f"no worker node held an LLM actor, a KB actor and a running shard task mid-run: {seen}"
    assert removed[0] not in {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    traces = RunFolder(out).read_traces(["question_id", "error"])
    assert sorted(traces["question_id"].to_pylist()) == [f"q{i:03d}" for i in range(N)], "each traced once"
    assert traces["error"].null_count == N, set(traces["error"].drop_null().to_pylist())
    answers = _answers(out)
    assert len(answers) == len(set(answers)) == N, "no answer row doubled"
    assert answers == one_node_answers
    assert summary.ok and summary.questions == N
