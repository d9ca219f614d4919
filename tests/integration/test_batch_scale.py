"""A large corpus through the whole batch job on the zero-cost gold model (slow: a few minutes on 2 cores).

Train and valid questions repeated under distinct ids, as ``kifqa bench batch`` builds them: every
question gets exactly one trace and no error; the repeats of a question, answered in different shards
and tasks, get the same answers; and the answers contain the gold answer for nearly every question
(the gold model drafts perfectly, so what is lost is the KB side: entity search and relation choice).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray

from kifqa.batch import run_job
from kifqa.bench.batch import corpus
from kifqa.config import Settings
from kifqa.eval.datasets import load_sqwd
from kifqa.kb.build import BuiltKB

pytestmark = pytest.mark.slow

N = 3000


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_a_large_corpus_on_the_gold_model(cluster, settings: Settings, built_kb: BuiltKB, tmp_path: Path) -> None:
    job = settings.model_copy(update={
        "llm": settings.llm.model_copy(update={"backend": "gold", "cache": None}),
        "batch": settings.batch.model_copy(update={"kb_cache": False, "kb_actors": 2, "llm_actor_cpus": 0})})
    questions = corpus(job, tmp_path / "corpus.jsonl", N)
    summary = run_job(job, questions, tmp_path / "out", progress=False)
    assert summary.ok and summary.questions == N and summary.errors == 0

    texts = {row["id"]: row["question"] for row in map(json.loads, questions.read_text().splitlines())}
    traces = pq.read_table(tmp_path / "out" / "traces", columns=["question_id", "error"]).to_pylist()
    assert sorted(t["question_id"] for t in traces) == sorted(texts)
    answers: dict[str, set[str]] = defaultdict(set)
    for a in pq.read_table(tmp_path / "out" / "answers", columns=["question_id", "answer"]).to_pylist():
        answers[a["question_id"]].add(a["answer"])
    by_text: dict[str, set[frozenset[str]]] = defaultdict(set)
    for qid, text in texts.items():
        by_text[text].add(frozenset(answers[qid]))
    assert len(by_text) < N and all(len(v) == 1 for v in by_text.values()), "repeats answered alike"

    gold = {q.text: q.answer for split in ("train", "valid") for q in load_sqwd(settings.data_dir, split)}
    hits = [gold[t] in answers[qid] for qid, t in texts.items() if t in gold]
    assert len(hits) > 0.9 * N and sum(hits) > 0.9 * len(hits)
