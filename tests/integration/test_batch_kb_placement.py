"""``batch.kb_placement``: the local base opened in each shard task gives the answers and traces of the KB
actors', starts no KB actor, counts its calls and coalesces a task's lookups; an endpoint with a limit keeps
its actors; a base that cannot be opened stops the job with its own error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kifqa.batch import actor_pools, run_job
from kifqa.batch.kbpool import kb_in_tasks
from kifqa.batch.limiter import endpoint_limit
from kifqa.bench.batch import _comparable, held_out
from kifqa.config import Settings
from kifqa.errors import ConfigError, KifqaError
from kifqa.kb.build import BuiltKB
from kifqa.kb.spec import kb_routes
from tests.integration.test_batch_job import cluster  # noqa: F401 - the Ray cluster of this module's tests

pytestmark = pytest.mark.usefixtures("cluster")

N = 24  # two shards of 12, one a task


def _job(settings: Settings, placement: str) -> Settings:
    return settings.override(llm={"backend": "gold", "cache": None, "cache_mode": "off"},
                             batch={"kb_placement": placement, "kb_cache": False, "kb_actors": 2,
                                    "llm_actor_cpus": 0, "shard_size": 12, "max_tasks": 2})


def test_the_base_opened_in_the_tasks_answers_as_the_kb_actors(settings: Settings, built_kb: BuiltKB,
                                                               tmp_path: Path) -> None:
    corpus = held_out(settings, tmp_path / "questions.jsonl", N)
    summaries = {}
    for placement in ("actors", "tasks"):
        job = _job(settings, placement)
        with actor_pools(job) as pools:
            assert (pools.kb is None) == (placement == "tasks") and len(pools.kb_actors) == (placement == "actors") * 2
            summaries[placement] = run_job(job, corpus, tmp_path / placement, pools=pools, progress=False)
    tasks, actors = summaries["tasks"], summaries["actors"]
    assert tasks.ok and tasks.questions == N and tasks.errors == 0 and tasks.answered > 0.8 * N
    assert tasks.kb_actors == 0 and actors.kb_actors == 2
    assert tasks.kb_calls_per_question == actors.kb_calls_per_question > 2
    assert _comparable(tmp_path / "tasks") == _comparable(tmp_path / "actors"), "the same answers and traces"

    # The tasks' own knowledge bases share the KB cache, and their hits reach the summary.
    cached = _job(settings, "tasks").override(batch={"kb_cache": True})
    run_job(cached, corpus, tmp_path / "cached-1", progress=False)
    again = run_job(cached, corpus, tmp_path / "cached-2", progress=False)
    assert again.kb_actors == 0 and again.kb_cache_hit_rate == 1.0

    # A task's questions in flight share queries: the traces name batches of more than one lookup.
    traces = [json.loads(line) for line in _trace_texts(tmp_path / "tasks")]
    sizes = [int(f["batch"].split(" of ")[1].split()[0]) for t in traces for f in t["filters"] if f.get("batch")]
    assert sizes and max(sizes) > 1


def _trace_texts(out: Path) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(out / "traces", columns=["trace"])["trace"].to_pylist()


def test_a_base_that_cannot_be_opened_stops_the_job_with_its_error(settings: Settings, tmp_path: Path) -> None:
    job = _job(settings, "tasks").override(kb={"spec": "local"}, data_dir=tmp_path / "no-data",
                                           cache_dir=tmp_path / "cache")
    with pytest.raises(KifqaError), actor_pools(job):
        pass


def test_placement_follows_the_endpoint_limit(settings: Settings) -> None:
    def in_tasks(job: Settings) -> bool:
        routes = kb_routes(job)
        return kb_in_tasks(job.batch.kb_placement, endpoint_limit(job.batch, routes), spec=routes.spec)

    assert in_tasks(settings.override(kb={"spec": "local"}))
    assert not in_tasks(settings.override(kb={"spec": "wikidata"})), "WDQS's limit needs the actor pool"
    assert not in_tasks(settings.override(kb={"spec": "local"}, batch={"kb_placement": "actors"}))
    assert in_tasks(settings.override(kb={"spec": "sparql+wikidata:http://127.0.0.1:1/sparql"},
                                      batch={"kb_placement": "tasks"}))
    with pytest.raises(ConfigError, match="use actors"):
        in_tasks(settings.override(kb={"spec": "wikidata"}, batch={"kb_placement": "tasks"}))
