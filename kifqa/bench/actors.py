"""``kifqa bench actors``: how the batch job scales with LLM actors on this machine, in one run.

The first N questions of SimpleQuestions-Wikidata's validation split are answered by the whole job
(the real pipeline, the local KB, the real local model with no record/replay cache and no KB cache)
once per LLM-actor count, each actor a llama.cpp model on one thread. Each run starts its actors
(models loaded) and first answers two other questions per actor, so that every model has the
prompts' shared prefixes in its cache; the measured job then runs on the same warm actors. For each
run it prints questions/s, the share of the actors' wall time with no model call in flight, and LLM
and KB calls per question; then the speed-up of the last run over the first.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import click

from kifqa.batch import Summary, actor_pools, run_job
from kifqa.cli.options import load_settings
from kifqa.config import Settings
from kifqa.eval.datasets import GoldQuestion, load_sqwd

#: Targets on a 2-core machine (see docs/batch.md).
SPEED_UP_TARGET = 1.8
OUTSIDE_TARGET = 0.15


@click.command()
@click.option("--questions", "n", type=click.IntRange(min=1), default=32, show_default=True,
              help="Questions answered by each run.")
@click.option("--actors", default="1,2", show_default=True, help="LLM-actor counts to compare, comma-separated.")
@click.option("--parallel", type=click.IntRange(min=1), default=None,
              help="llama.cpp slots per actor (default: llm.parallel).")
@click.option("--model", help="Model (default: the configured one).")
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A YAML settings file.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def actors(n: int, actors: str, parallel: int | None, model: str | None, config: Path | None, as_json: bool) -> None:
    """Questions/s with 1 and 2 LLM actors, time outside model calls, calls per question."""
    counts = [int(a) for a in actors.split(",")]
    settings = _bench_settings(load_settings(config, model=model), parallel)
    pool = load_sqwd(settings.data_dir, "valid", limit=n + 2 * max(counts))
    with tempfile.TemporaryDirectory(prefix="kifqa-bench-") as tmp:
        questions = _corpus(Path(tmp) / "questions.jsonl", pool[:n])
        runs = {}
        for k in counts:
            warm_up = _corpus(Path(tmp) / f"warm-up-{k}.jsonl", pool[n:n + 2 * k])
            runs[k] = _run(settings, k, n, warm_up, questions, Path(tmp) / f"out-{k}")
    figures = _figures(runs, settings)
    click.echo(json.dumps(figures, indent=2) if as_json else _render(figures))


def _corpus(path: Path, questions: list[GoldQuestion]) -> Path:
    path.write_text("".join(json.dumps({"id": q.id, "question": q.text}) + "\n" for q in questions))
    return path


def _bench_settings(settings: Settings, parallel: int | None) -> Settings:
    """Real model calls (no record/replay cache), one thread per model, no KB cache."""
    return settings.override(llm={"cache": None, "cache_mode": "off", "threads": 1,
                                  "parallel": parallel or settings.llm.parallel})


def _run(settings: Settings, actors: int, n: int, warm_up: Path, corpus: Path,
         out: Path) -> tuple[Summary, tuple[float, float]]:
    """The measured job on ``actors`` warm LLM actors, every question in flight from the start, and
    the machine's load average before and after it (other processes slow it down)."""
    shards = 2 * actors
    settings = settings.override(batch={
        "llm_actors": actors, "llm_actor_cpus": 1, "kb_actors": 1, "kb_cache": False, "resume": False,
        "shard_size": -(-n // shards), "max_tasks": shards, "task_concurrency": -(-n // shards)})
    with actor_pools(settings) as pools:
        run_job(settings, warm_up, out.with_name(out.name + "-warm-up"), pools=pools, progress=False)
        load = os.getloadavg()[0]
        summary = run_job(settings, corpus, out, pools=pools, progress=False)
        return summary, (load, os.getloadavg()[0])


def _figures(runs: dict[int, tuple[Summary, tuple[float, float]]], settings: Settings) -> dict[str, object]:
    first, last = runs[min(runs)][0], runs[max(runs)][0]
    return {
        "model": settings.llm.model,
        "cpus": os.cpu_count(),
        "runs": [{
            "llm_actors": k,
            "questions": s.ran,
            "errors": s.errors,
            "seconds": s.seconds,
            "questions_per_s": round(s.questions_per_s, 4),
            "outside_model_share": round(1 - s.llm_busy_share, 4),
            "llm_calls_per_question": round(s.llm_calls_per_question, 3),
            "tokens_per_question": round(s.prompt_tokens_per_question + s.completion_tokens_per_question, 1),
            "kb_calls_per_question": round(s.kb_calls_per_question, 3),
            "load_average": [round(load[0], 2), round(load[1], 2)],
        } for k, (s, load) in sorted(runs.items())],
        "speed_up": round(last.questions_per_s / first.questions_per_s, 3) if first.questions_per_s else None,
    }


def _render(figures: dict[str, Any]) -> str:
    lines = [f"batch job, {figures['model']}, {figures['cpus']} CPUs, one llama.cpp thread per LLM actor",
             f"{'actors':>6} {'questions':>9} {'seconds':>8} {'q/s':>7} {'outside model':>13} "
             f"{'LLM calls/q':>11} {'tokens/q':>8} {'KB calls/q':>10} {'load before/after':>17}"]
    for r in figures["runs"]:
        lines.append(f"{r['llm_actors']:>6} {r['questions']:>9} {r['seconds']:>8.1f} {r['questions_per_s']:>7.3f} "
                     f"{r['outside_model_share']:>13.1%} {r['llm_calls_per_question']:>11.2f} "
                     f"{r['tokens_per_question']:>8.0f} {r['kb_calls_per_question']:>10.2f} "
                     f"{r['load_average'][0]:>8.2f}/{r['load_average'][1]:<8.2f}")
    speed_up = figures["speed_up"]
    if speed_up is not None:
        lines.append(f"speed-up {speed_up:.2f}x (target >= {SPEED_UP_TARGET}x); outside model calls: "
                     f"target <= {OUTSIDE_TARGET:.0%}")
    return "\n".join(lines)
