"""A question queued behind the public hosts' limits never times out for waiting: a real Ray job on the gold model
through ``--kb wikidata``'s path against the Wikidata stand-ins, all its questions in flight at once behind a tight
WDQS limit, with a question timeout far under the time the last of them waits for its turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray

from kifqa.batch import run_job
from kifqa.bench.batch import held_out
from kifqa.bench.standins.stack import wikidata_standins
from kifqa.config import WIKIDATA_API_LIMIT, EndpointLimit, Settings
from kifqa.kb.build import BuiltKB

#: Questions, all in flight at once; WDQS requests a second the job may send (about 4 a question).
N, WDQS_PER_S = 20, 6.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_questions_queued_behind_the_limits_never_time_out(cluster: None, settings: Settings, built_kb: BuiltKB,
                                                          tmp_path: Path) -> None:
    with wikidata_standins(settings, sparql={"latency_s": 0.0}, api={"latency_s": 0.0}) as wd:
        job = settings.override(
            llm={"backend": "gold", "cache": None, "cache_mode": "off"}, examples={"mode": "fixed"},
            kb={"spec": "wikidata", "endpoints": wd.endpoints, "wikidata_lookups": "sparql"},  # every lookup on WDQS
            batch={"kb_cache": False, "resume": False, "llm_actor_cpus": 0, "kb_actors": 1, "max_tasks": 1,
                   "shard_size": N, "task_concurrency": N, "question_timeout_s": 2.0,
                   "limits": {"query.wikidata.org": EndpointLimit(max_concurrent=1, per_second=WDQS_PER_S),
                              "www.wikidata.org": WIKIDATA_API_LIMIT}})
        summary = run_job(job, held_out(job, tmp_path / "questions.jsonl", N), tmp_path / "out", progress=False)
        asked = wd.sparql.counts.requests
    errors = [e for e in pq.read_table(tmp_path / "out" / "traces", columns=["error"])["error"].to_pylist() if e]
    assert summary.questions == N and not [e for e in errors if "no answer after" in e], errors
    # the limit held the job well past the question timeout: the last questions waited that long for their turn
    assert asked / WDQS_PER_S > 3 * job.batch.question_timeout_s
    assert summary.answered > N / 2
