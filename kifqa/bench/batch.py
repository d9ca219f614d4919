"""``kifqa bench batch``: what the batch job itself costs, on a corpus of up to 100,000 questions.

The model is the zero-cost ``gold`` backend (:mod:`kifqa.llm.gold`), so only kifqa, Ray and the
knowledge base spend time. The corpus is SimpleQuestions-Wikidata's train and valid questions that
have a gold draft, repeated under distinct ids up to ``--questions``. The job runs once on warm
actors (models loaded, KB opened), KB cache off; then it is run again into the same folder, which
must skip every shard. Printed: questions/s; CPU seconds per question of the driver, the shard
tasks, the LLM actors, the KB actors and Ray's own processes (raylet, GCS, idle workers); the
driver's peak RSS; output bytes per question; and the resume time.

``--endpoint wdqs-like`` puts the local base behind :class:`~kifqa.bench.wdqs_like.WDQSLike` (WDQS's
query-time budget, 0.2 s charged per query, 5 in flight, 0.15 s latency) with WDQS's limit in
``batch.limits``, and answers held-out validation questions (from ``sqwd-valid-200``) twice, with KB
lookups coalesced and one query per lookup (``kb.batch_size: 1``), each against a fresh endpoint. It
prints, for both: questions/s, endpoint queries and charged seconds per question, the 429s, the
requests sent while a Retry-After ran, the hours 100,000 questions would take, and whether the two
runs gave the same answers and traces (apart from SPARQL text, batch names and timings).

``--out-uri URI`` writes the job's run folder to local disk and to ``URI`` (an object store, e.g.
``s3://bucket/prefix`` at the server the ``AWS_*`` variables name) in turn, twice each, on the same warm
actors, and prints the questions/s of both and their ratio (goal: the object store at least 0.8 of disk).
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import pyarrow.parquet as pq

from kifqa.batch import Pools, actor_pools, run_job
from kifqa.batch.kbpool import kb_in_tasks
from kifqa.batch.limiter import endpoint_limit
from kifqa.batch.llmpool import cluster_cpus
from kifqa.bench.public_like import measure_public_paths, render_public_like
from kifqa.bench.wdqs_like import WDQSLike
from kifqa.cli.options import load_settings
from kifqa.config import WDQS_LIMIT, Settings
from kifqa.data.paths import SQWD_SPLITS as SPLITS
from kifqa.data.pool import sqwd_pool
from kifqa.eval.datasets import load_sqwd
from kifqa.kb.build import locate
from kifqa.kb.server import OxigraphServer
from kifqa.kb.spec import kb_routes
from kifqa.runs.storage import shown

#: Targets on a 2-core machine (docs/batch.md).
TARGETS = {"questions_per_s": 40.0, "driver_peak_rss_mib": 1024.0, "trace_bytes_per_question": 4096.0,
           "resume_s": 30.0}


@click.command()
@click.option("--questions", "n", type=click.IntRange(min=1), default=None,
              help="Questions in the corpus (train and valid questions repeated under distinct ids; "
                   "wdqs-like: valid questions from 200 on). Default: 5000; wdqs-like: 600.")
@click.option("--endpoint", type=click.Choice(["local", "wdqs-like", "public-like"]), default="local",
              show_default=True, help="The local base in process, or behind a WDQS-like endpoint (batched vs "
                                      "unbatched), or --kb wikidata against the Wikidata stand-ins (politeness).")
@click.option("--kb-actor-concurrency", type=click.IntRange(min=1), default=None,
              help="Calls one KB actor takes at once (default: the configured one).")
@click.option("--kb-actors", type=click.IntRange(min=1), default=None,
              help="KB actors. Default: 2 (one per core here: a KB actor is one process, bound by one core); "
                   "public-like: the configured one.")
@click.option("--kb-placement", type=click.Choice(["auto", "actors", "tasks"]), default=None,
              help="Where the knowledge base is opened (default: the configured one; docs/batch.md).")
@click.option("--shard-size", type=click.IntRange(min=1), default=None, help="Default: the configured one.")
@click.option("--max-tasks", type=click.IntRange(min=1), default=None, help="Default: the configured one.")
@click.option("--task-concurrency", type=click.IntRange(min=1), default=None, help="Default: the configured one.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Keep the corpus and the job's output here (default: a temporary folder, removed).")
@click.option("--out-uri", help="Write the run folder to local disk and to this URI (s3://bucket/prefix) in turn, "
                                "twice each, and print both questions/s and their ratio (goal >= 0.8).")
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A YAML settings file.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def batch(n: int | None, endpoint: str, kb_actor_concurrency: int | None, kb_actors: int | None,
          kb_placement: str | None,
          shard_size: int | None, max_tasks: int | None, task_concurrency: int | None, out: Path | None,
          out_uri: str | None, config: Path | None, as_json: bool) -> None:
    """Questions/s, CPU per question by actor kind, driver RSS, output size and resume time of a large job;
    with ``--endpoint wdqs-like``, batched against unbatched KB lookups behind WDQS's rules."""
    options = {"kb_actors": kb_actors, "kb_placement": kb_placement, "shard_size": shard_size, "max_tasks": max_tasks,
               "task_concurrency": task_concurrency, "kb_actor_concurrency": kb_actor_concurrency}
    # Behind the endpoint's latency a question waits longer: more in flight give batches to fill. The public-like
    # job runs on the defaults a user gets: a question waiting on the limits never times out (kifqa.batch.clock).
    defaults = {"wdqs-like": _WDQS_DEFAULTS, "public-like": {}}.get(endpoint, {"kb_actors": 2})
    given = {k: v for k, v in options.items() if v is not None}
    settings = _bench_settings(load_settings(config), {**defaults, **given})
    with tempfile.TemporaryDirectory(prefix="kifqa-bench-") as tmp:
        root = out or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        if endpoint == "wdqs-like":
            figures = measure_wdqs_like(settings, held_out(settings, root / "questions.jsonl", n or 600), root)
            click.echo(json.dumps(figures, indent=2) if as_json else render_wdqs_like(figures))
            return
        if endpoint == "public-like":
            figures = measure_public_paths(settings, held_out(settings, root / "questions.jsonl", n or 600), root)
            click.echo(json.dumps(figures, indent=2) if as_json else render_public_like(figures))
            return
        if out_uri is not None:
            figures = measure_output(settings, corpus(settings, root / "questions.jsonl", n or 5000), root / "out",
                                     out_uri)
            click.echo(json.dumps(figures, indent=2) if as_json else render_output(figures))
            return
        figures = measure(settings, corpus(settings, root / "questions.jsonl", n or 5000), root / "out")
    click.echo(json.dumps(figures, indent=2) if as_json else render(figures))


def _bench_settings(settings: Settings, batch: dict[str, object]) -> Settings:
    """The gold model (no cache), the local base without the KB cache, a fresh start."""
    return settings.override(llm={"backend": "gold", "cache": None, "cache_mode": "off"},
                             batch={"kb_cache": False, "resume": False, "llm_actor_cpus": 0, **batch})


def corpus(settings: Settings, path: Path, n: int) -> Path:
    """``n`` questions: the train and valid questions with a gold draft, repeated under distinct ids."""
    texts = [e.question for split in SPLITS for e in sqwd_pool(settings.data_dir, split=split)]
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"q{i:06d}", "question": texts[i % len(texts)]}) + "\n")
    return path


def held_out(settings: Settings, path: Path, n: int) -> Path:
    """``n`` validation questions from ``sqwd-valid-200`` on (never tuned on)."""
    with path.open("w", encoding="utf-8") as f:
        for q in load_sqwd(settings.data_dir, "valid")[200:200 + n]:
            f.write(json.dumps({"id": q.id, "question": q.text}) + "\n")
    return path


#: Job settings of ``--endpoint wdqs-like`` unless given: 600 questions in flight (a shard's all at once).
_WDQS_DEFAULTS = {"max_tasks": 6, "task_concurrency": 100, "kb_actor_concurrency": 1024, "kb_actors": 2}

#: The two runs of ``--endpoint wdqs-like``: their KB batch sizes (``None``: the configured one).
_WDQS_RUNS = {"batched": None, "unbatched": 1}


def measure_wdqs_like(settings: Settings, corpus: Path, root: Path) -> dict[str, object]:
    """The job on ``corpus`` against a fresh WDQS-like endpoint, batched and unbatched; their figures."""
    figures: dict[str, object] = {}
    with OxigraphServer(locate(settings).store_dir) as server:
        port = 0
        for name, size in _WDQS_RUNS.items():
            with WDQSLike(server.url, port=port) as endpoint:
                port = int(endpoint.url.split(":")[2].split("/")[0])  # the same spec (and trace) both runs
                # The gold model reads no examples: fixed ones spare each task the clusters' start-up.
                run = settings.override(kb={"spec": f"sparql+wikidata:{endpoint.url}",
                                            **({"batch_size": size} if size else {})},
                                        examples={"mode": "fixed"},
                                        batch={"limits": {"127.0.0.1": WDQS_LIMIT.model_dump()}})
                with actor_pools(run) as pools:
                    endpoint.reset_counts()  # the actors' start-up sends no query; count only the job
                    start = time.perf_counter()
                    summary = run_job(run, corpus, root / name, pools=pools, progress=False)
                    wall = time.perf_counter() - start
                counts = endpoint.counts
            q = summary.ran or 1
            rate = summary.ran / wall
            # The endpoint's budget bounds any rate over a long run: budget seconds per second over the
            # seconds charged per question (the first minutes may run faster on the burst allowance).
            sustained = min(rate, (endpoint.budget_s / 60.0) / (counts.charged_s / q)) if counts.charged_s else rate
            figures[name] = {
                "batch_size": run.kb.batch_size, "questions": summary.ran, "answered": summary.answered,
                "errors": summary.errors, "seconds": round(wall, 1), "questions_per_s": round(rate, 2),
                "sustained_questions_per_s": round(sustained, 2),
                "queries_per_question": round(counts.requests / q, 3),
                "charged_s_per_question": round(counts.charged_s / q, 4),
                "throttled_429": counts.throttled, "inside_retry_after": counts.inside_retry_after,
                "max_running": counts.max_running, "endpoint_timeouts": counts.timeouts,
                "hours_per_100k": round(100_000 / sustained / 3600, 2),
            }
    figures["same_answers_and_traces"] = _comparable(root / "batched") == _comparable(root / "unbatched")
    figures["cpus"], figures["load_average"] = os.cpu_count(), [round(x, 2) for x in os.getloadavg()]
    return figures


#: Trace fields that may differ between a batched and an unbatched run.
_VARYING = frozenset({"seconds", "timings", "latency_s", "sparql", "batch"})


def _comparable(out: Path) -> tuple[list[str], list[str]]:
    """A run's answers and traces without what batching may change (SPARQL text, batch names, timings)."""
    def strip(x: object) -> object:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in _VARYING}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    answers = pq.read_table(out / "answers").to_pylist()
    traces = pq.read_table(out / "traces").to_pylist()
    return (sorted(json.dumps(a, sort_keys=True) for a in answers),
            sorted(json.dumps(strip({**t, "trace": json.loads(t["trace"])}), sort_keys=True) for t in traces))


def render_wdqs_like(f: dict[str, object]) -> str:
    rows = [("questions/s", "questions_per_s"), ("questions/s the budget sustains", "sustained_questions_per_s"),
            ("queries per question", "queries_per_question"), ("charged s per question", "charged_s_per_question"),
            ("429s received", "throttled_429"), ("requests inside a Retry-After", "inside_retry_after"),
            ("most queries running at once", "max_running"), ("error rows", "errors"),
            ("hours for 100,000 questions", "hours_per_100k")]
    b, u = f["batched"], f["unbatched"]
    assert isinstance(b, dict) and isinstance(u, dict)
    lines = [f"WDQS-like endpoint (60 s per 60 s, 0.2 s per query, 5 in flight, 0.15 s latency) over the local "
             f"base; gold model, local label search; {b['questions']} held-out questions (sqwd-valid-200 on), "
             f"{f['cpus']} CPUs",
             f"{'':34}{'batched':>12}{'unbatched':>12}"]
    lines += [f"{label:34}{b[key]:>12}{u[key]:>12}" for label, key in rows]
    ratio = b["sustained_questions_per_s"] / u["sustained_questions_per_s"] if u["sustained_questions_per_s"] else 0
    lines += [f"speed-up {ratio:.1f}x (sustained); same answers and traces: {f['same_answers_and_traces']}",
              f"load average {f['load_average']} (after the runs; other processes share the CPUs)"]
    return "\n".join(lines)


def measure(settings: Settings, corpus: Path, out: Path) -> dict[str, object]:
    """Runs the job on warm actors, then reruns it (everything skipped); the figures of both."""
    with actor_pools(settings) as pools:
        cpu = _cpu(pools)
        start = time.perf_counter()
        summary = run_job(settings, corpus, out, pools=pools, progress=False)
        wall = time.perf_counter() - start
        used = {k: v - cpu[k] for k, v in _cpu(pools).items()}
    used["tasks"] = summary.task_cpu_s
    used["ray"] = max(used.pop("tree") - sum(used.values()), 0.0)
    resume_settings = settings.override(batch={"resume": True})
    start = time.perf_counter()
    again = run_job(resume_settings, corpus, out, progress=False)
    resume_s = time.perf_counter() - start
    q = summary.ran or 1
    routes = kb_routes(settings)
    in_tasks = kb_in_tasks(settings.batch.kb_placement, endpoint_limit(settings.batch, routes), spec=routes.spec)
    sizes = {kind: sum(p.stat().st_size for p in (out / kind).glob("*.parquet")) for kind in ("answers", "traces")}
    return {
        "questions": summary.questions, "errors": summary.errors, "answered": summary.answered,
        "kb": ("opened in each task" if in_tasks
               else f"{settings.batch.kb_actors} KB actor(s)"),
        "llm_actors": settings.batch.llm_actors,
        "shard_size": settings.batch.shard_size, "max_tasks": settings.batch.max_task_count(cpus=cluster_cpus()),
        "task_concurrency": settings.batch.task_concurrency, "cpus": os.cpu_count(),
        "seconds": round(wall, 2), "questions_per_s": round(summary.ran / wall, 2),
        "cpu_ms_per_question": {k: round(1000 * v / q, 2) for k, v in used.items()},
        "driver_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "answer_bytes_per_question": round(sizes["answers"] / q, 1),
        "trace_bytes_per_question": round(sizes["traces"] / q, 1),
        "resume_s": round(resume_s, 2), "resume_skipped_all": again.shards_skipped == again.shards and not again.ran,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


#: The goal of ``--out-uri``: questions/s with the run folder on the object store over local disk's.
OUTPUT_RATIO_GOAL = 0.8


def measure_output(settings: Settings, corpus: Path, local: Path, uri: str) -> dict[str, object]:
    """The job on ``corpus`` on warm actors with its run folder on local disk and at ``uri`` in turn (disk,
    URI, disk, URI: drifting load falls on both); questions/s of each run and of both places."""
    runs: dict[str, list[tuple[int, float]]] = {"local": [], "uri": []}
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    with actor_pools(settings) as pools:
        for turn in range(2):
            for place, out in (("local", str(local / f"run-{turn}")), ("uri", f"{uri.rstrip('/')}/{stamp}-{turn}")):
                start = time.perf_counter()
                summary = run_job(settings, corpus, out, pools=pools, progress=False)
                runs[place].append((summary.ran, time.perf_counter() - start))
    rate = {place: sum(q for q, _ in done) / sum(s for _, s in done) for place, done in runs.items()}
    return {"questions": runs["local"][0][0], "uri": shown(uri), "cpus": os.cpu_count(),
            "local_questions_per_s": [round(q / s, 2) for q, s in runs["local"]],
            "uri_questions_per_s": [round(q / s, 2) for q, s in runs["uri"]],
            "ratio": round(rate["uri"] / rate["local"], 3), "goal": OUTPUT_RATIO_GOAL,
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def render_output(f: dict[str, Any]) -> str:
    return "\n".join([
        f"batch job on the zero-cost gold model, {f['questions']} questions, run folder on local disk and at "
        f"{f['uri']} in turn, twice each, on the same warm actors, {f['cpus']} CPUs",
        f"local disk       {f['local_questions_per_s']} questions/s",
        f"object store     {f['uri_questions_per_s']} questions/s",
        f"ratio            {f['ratio']} (object store over local disk, all runs; goal >= {f['goal']:g})",
        f"load average     {f['load_average']} (after the runs; other processes share the CPUs)",
    ])


def _cpu(pools: Pools) -> dict[str, float]:
    """CPU seconds so far of the driver, of the LLM and KB actors, and of the driver's whole process
    tree (Ray's processes, the actors and task workers started by this driver)."""
    return {"driver": time.process_time(), **pools.cpu_seconds(), "tree": _tree_cpu(os.getpid())}


def _tree_cpu(root: int) -> float:
    """CPU seconds of process ``root`` and all its descendants alive now (Linux ``/proc``)."""
    parent, ticks = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        parent[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])
    total, todo = 0, [root]
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo += children.get(pid, [])
    return total / os.sysconf("SC_CLK_TCK")


def render(f: dict[str, Any]) -> str:
    cpu = f["cpu_ms_per_question"]
    lines = [
        f"batch job on the zero-cost gold model, local KB (cache off), {f['cpus']} CPUs, "
        f"KB {f['kb']}, {f['llm_actors']} LLM actor(s), shards of {f['shard_size']}, "
        f"{f['max_tasks']} tasks x {f['task_concurrency']} questions in flight",
        f"questions        {f['questions']} ({f['answered']} answered, {f['errors']} errors) in {f['seconds']} s",
        f"questions/s      {f['questions_per_s']}  (target >= {TARGETS['questions_per_s']:g})",
        "CPU ms/question  " + ", ".join(f"{k} {v}" for k, v in cpu.items()) + f"; total {sum(cpu.values()):.1f}",
        f"driver peak RSS  {f['driver_peak_rss_mib']} MiB  (target <= {TARGETS['driver_peak_rss_mib']:g})",
        f"output           {f['trace_bytes_per_question']} trace + {f['answer_bytes_per_question']} answer bytes "
        f"per question  (traces: target <= {TARGETS['trace_bytes_per_question']:g})",
        f"resume           {f['resume_s']} s, every shard skipped: {f['resume_skipped_all']}  "
        f"(target <= {TARGETS['resume_s']:g} s)",
        f"load average     {f['load_average']} (after the run; other processes share the CPUs)",
    ]
    return "\n".join(lines)
