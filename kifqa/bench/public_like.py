"""``kifqa bench batch --endpoint public-like``: the batch job as ``--kb wikidata`` runs it against the Wikidata
stand-ins (:mod:`kifqa.bench.standins`), over the local base and over the hard base (its build behind the same
stand-ins, its homonyms in the API's search), each by the path of ``kb.wikidata_lookups: api`` (forward lookups and
terms from ``wbgetentities``, inverse lookups coalesced on WDQS) and beside it by today's ``sparql`` path (KIF's
``wdqs`` store for every lookup) on fewer questions (:data:`SPARQL_QUESTIONS`):
a WDQS-like front (WDQS's budget, 429 and Retry-After, 0.15 s latency, Blazegraph's dialect) and a
Wikidata-API-like server (1 request in flight and 10 a second per client, 429 beyond; a replication lag above
``maxlag`` for 3 s of every 30 s). The job runs on the default settings (its in-flight work, KB actors and the
limits of ``batch.limits`` for both hosts) with its KB cache on (fresh), on the gold model.

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

#: The API's simulated replication lag: above ``maxlag=5`` for 3 s of every 30 s.
BENCH_LAG = Lag(lag_s=8.0, every_s=30.0, for_s=3.0)
#: Words of an error that throttling left (a 429, a ``maxlag`` refusal, a wait given up).
_THROTTLING = ("429", "maxlag", "Retry-After", "Too Many Requests", "throttl")


#: Questions of today's ``sparql`` path at most (it runs near 1 question a second over the local base, half that
#: over the hard base: 2000 would take an hour).
SPARQL_QUESTIONS = 200
#: The runs: (name, hard base, ``kb.wikidata_lookups``).
RUNS = (("local, api", False, "api"), ("local, sparql (today)", False, "sparql"),
        ("hard, api", True, "api"), ("hard, sparql (today)", True, "sparql"))


def measure_public_paths(settings: Settings, corpus: Path, root: Path) -> dict[str, Any]:
    """:func:`measure_public_like` of each of :data:`RUNS` (today's path on the first :data:`SPARQL_QUESTIONS`
    questions of ``corpus``)."""
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    fewer = root / "questions-sparql.jsonl"
    fewer.write_text("".join(lines[:SPARQL_QUESTIONS]), encoding="utf-8")
    figures: dict[str, Any] = {}
    for name, hard, lookups in RUNS:
        figures[name] = measure_public_like(settings, corpus if lookups == "api" else fewer,
                                            root / name.split(",")[0] / lookups, hard=hard, lookups=lookups)
    return figures


def measure_public_like(settings: Settings, corpus: Path, root: Path, *, hard: bool = False,
                        lookups: str = "api") -> dict[str, object]:
    """The job on ``corpus`` through the public code path (``lookups``: ``kb.wikidata_lookups``) against fresh
    Wikidata stand-ins over the local base (``hard``: the hard base); its figures."""
    with wikidata_standins(settings, api={"lag": BENCH_LAG}, hard=hard) as wd:
        # The KB cache is keyed on kb.endpoints: the stand-ins' fresh ports give it a fresh namespace.
        run = settings.override(kb={"spec": "wikidata", "endpoints": wd.endpoints, "wikidata_lookups": lookups},
                                examples={"mode": "fixed"}, batch={"kb_cache": True})
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
        "questions": summary.ran, "lost": summary.questions - summary.ran + summary.errors,
        "answered": summary.answered, "seconds": round(wall, 1),
        "questions_per_s": round(rate, 2), "sustained_questions_per_s": round(sustained, 2),
        "hours_per_100k": round(100_000 / sustained / 3600, 2),
        "kb_cache_hit_rate": round(summary.kb_cache_hit_rate, 3), "error_rows": summary.errors,
        "throttling_error_rows": sum(1 for e in errors if e and any(w in e for w in _THROTTLING)),
        "wdqs": {"requests_per_question": round(sparql.requests / q, 3),
                 "charged_s_per_question": round(sparql.charged_s / q, 4), "throttled_429": sparql.throttled,
                 "inside_retry_after": sparql.inside_retry_after, "max_in_flight": sparql.max_running,
                 "limit_in_flight": limits["query.wikidata.org"].max_concurrent,
                 "blazegraph_queries": sparql.blazegraph},
        "api": {"requests_per_question": round(api.requests / q, 3),
                "per_question_by_action": {a: round(n / q, 3) for a, n in sorted(api.by_action.items())},
                "throttled_429": api.throttled,
                "maxlag_refused": api.maxlag_refused, "without_maxlag": api.without_maxlag,
                "inside_waits": api.inside_waits, "max_in_flight": api.max_in_flight,
                "limit_in_flight": limits["www.wikidata.org"].max_concurrent},
        "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def render_public_like(figures: dict[str, Any]) -> str:
    runs = list(figures.items())
    first = runs[0][1]
    rows = [("questions", lambda f: f["questions"]), ("questions/s (sustained by the budgets)",
                                                     lambda f: f["sustained_questions_per_s"]),
            ("questions/s (measured)", lambda f: f["questions_per_s"]),
            ("hours per 100,000", lambda f: f["hours_per_100k"]),
            ("WDQS requests per question", lambda f: f["wdqs"]["requests_per_question"]),
            ("API requests per question", lambda f: f["api"]["requests_per_question"]),
            ("  search / wbgetentities / full text", lambda f: " / ".join(
                str(f["api"]["per_question_by_action"].get(a, 0)) for a in _ACTIONS)),
            ("WDQS s charged per question", lambda f: f["wdqs"]["charged_s_per_question"]),
            ("requests inside waits (WDQS + API)",
             lambda f: f["wdqs"]["inside_retry_after"] + f["api"]["inside_waits"]),
            ("API requests without maxlag", lambda f: f["api"]["without_maxlag"]),
            ("most in flight WDQS (limit)", lambda f: _of(f["wdqs"])),
            ("most in flight API (limit)", lambda f: _of(f["api"])),
            ("429s (WDQS + API); maxlag refusals",
             lambda f: f"{f['wdqs']['throttled_429'] + f['api']['throttled_429']}; {f['api']['maxlag_refused']}"),
            ("questions lost (errors)", lambda f: f"{f['lost']} ({f['error_rows']})"),
            ("answered", lambda f: f["answered"])]
    width = 24
    lines = [
        f"--kb wikidata through the stand-ins (WDQS-like: 60 s per 60 s, 0.2 s per query, 5 in flight, 0.15 s "
        f"latency, Blazegraph dialect; API-like: 1 in flight, 10/s, lag {BENCH_LAG.lag_s:g} s for "
        f"{BENCH_LAG.for_s:g} s of every {BENCH_LAG.every_s:g} s); gold model, default limits, KB cache on (fresh); "
        f"held-out questions (sqwd-valid-200 on), today's sparql path on the first {SPARQL_QUESTIONS} only; "
        f"{first['cpus']} CPUs",
        f"{'':38}" + "".join(f"{name:>{width}}" for name, _ in runs)]
    lines += [f"{label:38}" + "".join(f"{str(get(f)):>{width}}" for _, f in runs) for label, get in rows]
    lines.append(f"load average {runs[-1][1]['load_average']} (after the runs; other processes share the CPUs)")
    return "\n".join(lines)


#: The API's actions the table counts apart: the search, the entities, the full-text search (``action=query``).
_ACTIONS = ("wbsearchentities", "wbgetentities", "query")


def _of(service: dict[str, Any]) -> str:
    return f"{service['max_in_flight']} ({service['limit_in_flight']})"
