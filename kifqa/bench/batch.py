"""``kifqa bench batch``: what the batch job itself costs, on a corpus of up to 100,000 questions.

The model is the zero-cost ``gold`` backend (:mod:`kifqa.llm.gold`), so only kifqa, Ray and the
knowledge base spend time. The corpus is SimpleQuestions-Wikidata's train and valid questions that
have a gold draft, repeated under distinct ids up to ``--questions``. The job runs once on warm
actors (models loaded, KB opened), KB cache off; then it is run again into the same folder, which
must skip every shard. Printed: questions/s; CPU seconds per question of the driver, the shard
tasks, the LLM actors, the KB actors and Ray's own processes (raylet, GCS, idle workers); the
driver's peak RSS; output bytes per question; and the resume time.
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

from kifqa.batch import Pools, actor_pools, run_job
from kifqa.cli.options import load_settings
from kifqa.config import Settings
from kifqa.data.pool import sqwd_pool
from kifqa.llm.gold import SPLITS

#: Targets on the 2-core machine (issue 14, docs/batch.md).
TARGETS = {"questions_per_s": 40.0, "driver_peak_rss_mib": 1024.0, "trace_bytes_per_question": 4096.0,
           "resume_s": 30.0}


@click.command()
@click.option("--questions", "n", type=click.IntRange(min=1), default=5000, show_default=True,
              help="Questions in the corpus (train and valid questions repeated under distinct ids).")
@click.option("--kb-actors", type=click.IntRange(min=1), default=2, show_default=True,
              help="KB actors (one per core here: a KB actor is one process, bound by one core).")
@click.option("--shard-size", type=click.IntRange(min=1), default=None, help="Default: the configured one.")
@click.option("--max-tasks", type=click.IntRange(min=1), default=None, help="Default: the configured one.")
@click.option("--task-concurrency", type=click.IntRange(min=1), default=None, help="Default: the configured one.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Keep the corpus and the job's output here (default: a temporary folder, removed).")
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A YAML settings file.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def batch(n: int, kb_actors: int, shard_size: int | None, max_tasks: int | None, task_concurrency: int | None,
          out: Path | None, config: Path | None, as_json: bool) -> None:
    """Questions/s, CPU per question by actor kind, driver RSS, output size and resume time of a large job."""
    options = {"kb_actors": kb_actors, "shard_size": shard_size, "max_tasks": max_tasks,
               "task_concurrency": task_concurrency}
    settings = _bench_settings(load_settings(config), {k: v for k, v in options.items() if v is not None})
    with tempfile.TemporaryDirectory(prefix="kifqa-bench-") as tmp:
        root = out or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        figures = measure(settings, corpus(settings, root / "questions.jsonl", n), root / "out")
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
    sizes = {kind: sum(p.stat().st_size for p in (out / kind).glob("*.parquet")) for kind in ("answers", "traces")}
    return {
        "questions": summary.questions, "errors": summary.errors, "answered": summary.answered,
        "kb_actors": settings.batch.kb_actors, "llm_actors": settings.batch.llm_actors,
        "shard_size": settings.batch.shard_size, "max_tasks": settings.batch.max_tasks,
        "task_concurrency": settings.batch.task_concurrency, "cpus": os.cpu_count(),
        "seconds": round(wall, 2), "questions_per_s": round(summary.ran / wall, 2),
        "cpu_ms_per_question": {k: round(1000 * v / q, 2) for k, v in used.items()},
        "driver_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "answer_bytes_per_question": round(sizes["answers"] / q, 1),
        "trace_bytes_per_question": round(sizes["traces"] / q, 1),
        "resume_s": round(resume_s, 2), "resume_skipped_all": again.shards_skipped == again.shards and not again.ran,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


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
        f"{f['kb_actors']} KB actor(s), {f['llm_actors']} LLM actor(s), shards of {f['shard_size']}, "
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
