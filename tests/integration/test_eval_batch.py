"""``evaluate_batch`` (``kifqa eval --batch``): the real batch job on a local Ray cluster, the real
pipeline on the built local KB (in the KB actors), a scripted model (in the LLM actor); then the run
folder is scored and gives the same scores as answering in-process."""

from __future__ import annotations

import asyncio
import sys
from functools import partial
from pathlib import Path

import pytest
import ray

import tests.fakes
from kifqa.config import Settings
from kifqa.eval.datasets import GoldExtender, load_sqwd
from kifqa.eval.sources import evaluate, evaluate_batch
from kifqa.llm.base import LLM, Usage
from kifqa.pipeline import Pipeline
from tests.fakes import ScriptedLLM

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ray.cloudpickle.register_pickle_by_value(tests.fakes)

DRAFTS = ["(sasha vujačić | place of birth | ?x)", "(?x | director | wiebke von carolsfeld)",
          "(seymour parker gilbert | occupation | ?x)", "(french city | place of death | ?x)", "no pattern at all"]


def open_scripted(settings: Settings, *, drafts: dict[str, str]) -> LLM:
    return ScriptedLLM(drafts, draft="?", usage=Usage(prompt_tokens=50, completion_tokens=5),
                       identity="scripted-batch")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.slow  # a Ray cluster: about 40 s on 2 busy cores
def test_eval_batch_scores_the_run_like_in_process(cluster, settings: Settings, built_kb, local_kb,
                                                   tmp_path: Path) -> None:
    questions = load_sqwd(settings.data_dir, "valid", limit=len(DRAFTS))
    drafts = {q.text: d for q, d in zip(questions, DRAFTS)}
    job = settings.model_copy(update={"batch": settings.batch.model_copy(update={
        "shard_size": 3, "max_tasks": 2, "kb_cache": False})})
    extender = GoldExtender(settings.data_dir)
    out = tmp_path / "run"
    batch = evaluate_batch(job, questions, extender, out, open_llm=partial(open_scripted, drafts=drafts),
                           progress=False)
    assert (out / "corpus.jsonl").is_file() and len(list((out / "traces").glob("shard-*.parquet"))) == 2
    assert batch.batch is not None and batch.batch.ok and batch.run is not None
    assert batch.run.run_questions == len(DRAFTS)
    in_process = asyncio.run(evaluate(Pipeline(kb=local_kb, llm=open_scripted(job, drafts=drafts)), questions, extender))
    assert [(s.gold.id, s.score, s.failure, s.linking) for s in batch.scored] == \
        [(s.gold.id, s.score, s.failure, s.linking) for s in in_process.scored]
    m = batch.metrics()
    assert m["correct"] == 3 and m["failure_counts"]["draft"] == 2 and m["wall_s"] > 0
    # a rerun resumes: nothing is answered again, the scores stay
    again = evaluate_batch(job, questions, extender, out, open_llm=partial(open_scripted, drafts=drafts),
                           progress=False)
    assert again.metrics()["all"] == m["all"]
