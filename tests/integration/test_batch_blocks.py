"""The batch job's LLM actors restore saved few-shot block states instead of evaluating them, and say so in
the job's summary: a first job on an empty block folder computes the block and saves it, a second job (new
actors, new model instances) restores it and gives the same answers. Real 0.5B model, real local base."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray

from kifqa.batch import run_job
from kifqa.config import Settings
from kifqa.eval.datasets import load_sqwd

pytest.importorskip("xllamacpp", reason="the local backend needs xllamacpp: pip install 'kifqa[local]'")

#: Two Ray jobs, each loading the model (about 3 minutes on two busy cores; test_llm_blockstate.py covers
#: restoring in the default suite).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _answers(out: Path) -> list[tuple[str, str]]:
    rows = pq.read_table(out / "answers", columns=["question_id", "answer"]).to_pylist()
    return sorted((r["question_id"], r["answer"]) for r in rows)


def test_a_second_job_restores_the_block_the_first_computed(cluster, settings: Settings, built_kb,
                                                            tmp_path: Path) -> None:
    blocks = tmp_path / "kv"
    job = settings.override(
        llm={"model": "qwen2.5-coder-0.5b", "parallel": 2, "block_dir": str(blocks), "cache": None},
        batch={"llm_actors": 1, "kb_actors": 1, "shard_size": 4, "kb_cache": False})
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": q.id, "question": q.text}) + "\n"
                              for q in load_sqwd(settings.data_dir, "valid")[200:204]))

    first = run_job(job, corpus, tmp_path / "first", progress=False)
    assert first.ok and first.errors == 0
    assert (first.blocks_computed, first.blocks_refused) == (1, 0)  # the fixed examples: one block
    assert first.block_compute_s > 0 and len(list(blocks.glob("*.bin"))) == 1
    assert "1 computed" in first.render()

    second = run_job(job, corpus, tmp_path / "second", progress=False)
    assert second.ok and second.errors == 0
    assert second.blocks_computed == 0 and second.blocks_restored >= 1 and second.block_restore_ms > 0
    assert _answers(tmp_path / "second") == _answers(tmp_path / "first")
