"""``kifqa bench batch --endpoint public-like``: the batch job as ``--kb wikidata`` runs it, through KIF's own
``wdqs`` store and ``wikidata-wapi`` search, against the Wikidata stand-ins (:mod:`kifqa.bench.standins`):
a WDQS-like front (WDQS's budget, 429 and Retry-After, 0.15 s latency, Blazegraph's dialect) and a
Wikidata-API-like server (1 request in flight and 10 a second per client, 429 beyond; a replication lag above
``maxlag`` for 3 s of every 30 s). The job runs with the default limits of ``batch.limits`` for both hosts and
its KB cache on (fresh), on the gold model.

It prints what each service saw: requests per question, 429s and ``maxlag`` refusals, requests sent inside a
wait the client had been told of, the most requests of the job in flight at once against the configured limit,
error rows (and those from throttling), questions/s, and the hours 100,000 questions take at the rate the two
services sustain (WDQS's query-time budget, the API's requests per second).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kifqa.batch import actor_pools, run_job
from kifqa.bench.standins.stack import wikidata_standins
from kifqa.bench.standins.wikidata_api import Lag
from kifqa.config import Settings

#: Job settings unless given: 32 questions in flight. The services' limits hold the job near 1 question a second,
#: so more in flight only wait longer each, and the last of 600 would pass ``batch.question_timeout_s``.
PUBLIC_DEFAULTS = {"max_tasks": 2, "task_concurrency": 16, "kb_actor_concurrency": 256}
#: The API's simulated replication lag: above ``maxlag=5`` for 3 s of every 30 s.
BENCH_LAG = Lag(lag_s=8.0, every_s=30.0, for_s=3.0)
#: Words of an error that throttling left (a 429, a ``maxlag`` refusal, a wait given up).
_THROTTLING = ("429", "maxlag", "Retry-After", "Too Many Requests", "throttl")


def measure_public_like(settings: Settings, corpus: Path, root: Path) -> dict[str, object]:
    """The job on ``corpus`` through the public code path against fresh Wikidata stand-ins; its figures."""
    with wikidata_standins(settings, api={"lag": BENCH_LAG}) as wd:
        # The KB cache is keyed on kb.endpoints: the stand-ins' fresh ports give it a fresh namespace.
        run = settings.override(kb={"spec": "wikidata", "endpoints": wd.endpoints}, examples={"mode": "fixed"},
                                batch={"kb_cache": True})
        with actor_pools(run) as pools:
            wd.sparql.reset_counts()
            wd.api.reset_counts()
            start = time.perf_counter()
            summary = run_job(run, corpus, root / "public-like", pools=pools, progress=False)
            wall = time.perf_counter() - start
        sparql, api = wd.sparql.counts, wd.api.counts
        budget_s_per_s, api_per_s = wd.sparql.budget_s / 60.0, wd.api.rate.per_second
    q = summary.ran or 1
    rate = summary.ran / wall
    # Over a long run the services' budgets bound the rate: WDQS's query seconds, the API's requests.
    bounds = [rate]
    if sparql.charged_s:
        bounds.append(budget_s_per_s / (sparql.charged_s / q))
    if api.requests:
        bounds.append(api_per_s / (api.requests / q))
    sustained = min(bounds)
    limits = run.batch.limits
    errors = pq.read_table(root / "public-like" / "traces", columns=["error"]).column("error").to_pylist()
    return {
        "questions": summary.ran, "answered": summary.answered, "seconds": round(wall, 1),
        "questions_per_s": round(rate, 2), "sustained_questions_per_s": round(sustained, 2),
        "hours_per_100k": round(100_000 / sustained / 3600, 2),
        "kb_cache_hit_rate": round(summary.kb_cache_hit_rate, 3), "error_rows": summary.errors,
        "throttling_error_rows": sum(1 for e in errors if e and any(w in e for w in _THROTTLING)),
        "wdqs": {"requests_per_question": round(sparql.requests / q, 3),
                 "charged_s_per_question": round(sparql.charged_s / q, 4), "throttled_429": sparql.throttled,
                 "inside_retry_after": sparql.inside_retry_after, "max_in_flight": sparql.max_running,
                 "limit_in_flight": limits["query.wikidata.org"].max_concurrent,
                 "blazegraph_queries": sparql.blazegraph},
        "api": {"requests_per_question": round(api.requests / q, 3), "throttled_429": api.throttled,
                "maxlag_refused": api.maxlag_refused, "without_maxlag": api.without_maxlag,
                "inside_waits": api.inside_waits, "max_in_flight": api.max_in_flight,
                "limit_in_flight": limits["www.wikidata.org"].max_concurrent},
        "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def render_public_like(f: dict[str, Any]) -> str:
    w, a = f["wdqs"], f["api"]
    return "\n".join([
        f"--kb wikidata through the stand-ins (WDQS-like: 60 s per 60 s, 0.2 s per query, 5 in flight, 0.15 s "
        f"latency, Blazegraph dialect; API-like: 1 in flight, 10/s, lag {BENCH_LAG.lag_s:g} s for "
        f"{BENCH_LAG.for_s:g} s of every {BENCH_LAG.every_s:g} s); gold model, default limits, KB cache on; "
        f"{f['questions']} held-out questions (sqwd-valid-200 on), {f['cpus']} CPUs",
        f"{'':40}{'WDQS':>10}{'API':>10}",
        f"{'requests per question':40}{w['requests_per_question']:>10}{a['requests_per_question']:>10}",
        f"{'429s received':40}{w['throttled_429']:>10}{a['throttled_429']:>10}",
        f"{'maxlag refusals':40}{'-':>10}{a['maxlag_refused']:>10}",
        f"{'requests inside a Retry-After/maxlag':40}{w['inside_retry_after']:>10}{a['inside_waits']:>10}",
        f"{'most in flight (limit)':40}{_of(w):>10}{_of(a):>10}",
        f"{'API requests without maxlag':40}{'-':>10}{a['without_maxlag']:>10}",
        f"questions/s {f['questions_per_s']}, sustained by the budgets {f['sustained_questions_per_s']}: "
        f"{f['hours_per_100k']} h for 100,000 questions",
        f"error rows {f['error_rows']} (from throttling: {f['throttling_error_rows']}); answered {f['answered']}; "
        f"KB cache hit rate {f['kb_cache_hit_rate']}",
        f"load average {f['load_average']} (after the run; other processes share the CPUs)"])


def _of(service: dict[str, Any]) -> str:
    return f"{service['max_in_flight']} ({service['limit_in_flight']})"
