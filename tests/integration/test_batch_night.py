"""The issue's night, shrunk: a corpus on the defaults (``--kb wikidata``'s default lookups, every batch setting as
shipped but the question timeout) against the Wikidata stand-ins with WDQS's budget scaled down, so that the job is
bound by the hosts' limits for many question timeouts. No question is lost to waiting and no request is sent inside a
wait: what 100,000 questions over a night at WDQS's real budget need."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray

from kifqa.batch import run_job
from kifqa.bench.batch import held_out
from kifqa.bench.standins.stack import wikidata_standins
from kifqa.config import WDQS_LIMIT, Settings
from kifqa.kb.build import BuiltKB

pytestmark = pytest.mark.slow

#: Questions (two default shards); WDQS's budget scaled to this share of its 60 query-seconds per minute.
N, SCALE = 200, 1 / 4
#: A question's own time at most (the default is 600 s): far under the time the job is bound by the limits.
TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_a_limit_bound_corpus_on_the_defaults_loses_no_question_to_waiting(
        cluster: None, settings: Settings, built_kb: BuiltKB, tmp_path: Path) -> None:
    budget_s, burst_s = 60.0 * SCALE, 120.0 * SCALE  # the stand-in's, per 60 s, as WDQS's own
    # kifqa's WDQS limit describes the host: scaled as its budget is (90 % of it, as the default keeps)
    wdqs = WDQS_LIMIT.model_copy(update={"budget_s_per_s": WDQS_LIMIT.budget_s_per_s * SCALE,
                                         "burst_s": WDQS_LIMIT.burst_s * SCALE})
    with wikidata_standins(settings, sparql={"latency_s": 0.0, "budget_s": budget_s, "burst_s": burst_s},
                           api={"latency_s": 0.0}) as wd:
        job = settings.override(
            llm={"backend": "gold", "cache": None, "cache_mode": "off"}, examples={"mode": "fixed"},
            kb={"spec": "wikidata", "endpoints": wd.endpoints},
            batch={"question_timeout_s": TIMEOUT_S,
                   "limits": {**settings.batch.limits, "query.wikidata.org": wdqs}})
        summary = run_job(job, held_out(job, tmp_path / "questions.jsonl", N), tmp_path / "out", progress=False)
        sparql, api = wd.sparql.counts, wd.api.counts
    errors = [e for e in pq.read_table(tmp_path / "out" / "traces", columns=["error"])["error"].to_pylist() if e]
    assert summary.questions == summary.ran == N
    assert not errors, errors[:3]  # none lost: not to waiting, not to anything else
    assert sparql.inside_retry_after == 0 and api.inside_waits == 0 and sparql.throttled == 0
    # bound by the limits for many question timeouts: the WDQS budget it spent, and the API's serial 10 a second
    bound_s = max(sparql.charged_s / (budget_s / 60.0), api.requests / 10.0)
    assert bound_s > 10 * TIMEOUT_S, (sparql, api)
