"""The batch job with the real pipeline, the built local KB and a replay cassette, on a real local
Ray cluster: the same answers as ``kifqa ask``, resume after a killed job, bad rows among real ones.

The cassette ``tests/data/cassettes/batch.sqlite`` holds the 0.5B model's answers for the first 300
validation questions (the 0.5B model records twice as fast as the default one). After changing a
prompt, record it again (about 10 minutes on 2 cores; the batch job records, two LLM actors)::

    KIFQA_CASSETTE=record pytest tests/integration/test_batch_pipeline.py
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray
import yaml

from kifqa.api import open_pipeline
from kifqa.batch import run_job
from kifqa.config import Settings
from kifqa.eval.datasets import load_sqwd
from kifqa.runs import RunFolder
from kifqa.types import Question
from tests.cassette import CASSETTES

REPO = Path(__file__).resolve().parents[2]
CASSETTE = CASSETTES / "batch.sqlite"
RECORD = os.environ.get("KIFQA_CASSETTE") == "record"
N = 300

#: An answer row, as compared between the batch job and the in-process pipeline.
Row = tuple[str, str, str, str]


@pytest.fixture(scope="module")
def replay(settings: Settings, built_kb) -> Settings:
    """The test settings, with the 0.5B model answered from the cassette (recorded when asked to)."""
    if not RECORD and not CASSETTE.is_file():
        pytest.fail(f"no replay cassette at {CASSETTE}: record it (see this module's docstring)", pytrace=False)
    llm = settings.llm.model_copy(update={
        "model": "qwen2.5-coder-0.5b", "cache": CASSETTE, "cache_mode": "record" if RECORD else "replay",
        "parallel": 2})
    batch = settings.batch.model_copy(update={"shard_size": 30, "max_tasks": 2, "llm_actors": 2, "kb_actors": 2})
    return settings.model_copy(update={"llm": llm, "batch": batch})


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def questions(replay: Settings) -> list[Question]:
    return [Question(q.id, q.text) for q in load_sqwd(replay.data_dir, "valid", limit=N)]


@pytest.fixture(scope="module")
def batch_run(cluster, replay: Settings, questions: list[Question], tmp_path_factory):
    """The 300 questions answered by the batch job (which records the cassette when asked to)."""
    tmp = tmp_path_factory.mktemp("batch")
    out = tmp / "out"
    return run_job(replay, _write_corpus(tmp / "corpus.jsonl", questions), out, progress=False), out


@pytest.fixture(scope="module")
def asked(batch_run, replay: Settings, questions: list[Question]) -> dict[str, tuple[str | None, set[Row]]]:
    """What ``kifqa ask`` (the in-process pipeline) says for each question: its error and answers."""

    async def ask_all():
        async with open_pipeline(settings=replay) as pipeline:
            return await asyncio.gather(*(pipeline.answer(q) for q in questions))

    results = asyncio.run(ask_all())
    return {r.question.id: (r.trace.error, {_row(a) for a in r.answer_rows()}) for r in results}


def _row(answer: dict) -> Row:
    return answer["answer"], answer["subject"], answer["property"], answer["value"]


def _write_corpus(path: Path, questions: list[Question]) -> Path:
    path.write_text("".join(json.dumps({"id": q.id, "question": q.text}) + "\n" for q in questions))
    return path


def _batch_results(out: Path) -> dict[str, tuple[str | None, set[Row]]]:
    traces = pq.read_table(out / "traces", columns=["question_id", "error"]).to_pylist()
    got: dict[str, tuple[str | None, set[Row]]] = {t["question_id"]: (t["error"], set()) for t in traces}
    assert len(got) == len(traces), "one trace row per question"
    for answer in pq.read_table(out / "answers").to_pylist():
        got[answer["question_id"]][1].add(_row(answer))
    return got


def test_300_questions_give_300_traces_and_the_answers_of_kifqa_ask(batch_run, questions, asked):
    summary, out = batch_run
    assert summary.ok and summary.questions == N and summary.input_errors == 0
    got = _batch_results(out)
    assert list(got) == [q.id for q in questions], "traces in corpus order"
    misses = [e for e, _ in got.values() if e and "replay cache miss" in e]
    assert not misses, f"{len(misses)} cassette misses (record it again): {misses[0]}"
    assert got == asked
    assert summary.answered > 0.8 * N and summary.llm_calls_per_question >= 1
    traces = pq.read_table(out / "traces", columns=["llm_calls", "llm_cache_hits"]).to_pylist()
    assert RECORD or all(t["llm_calls"] == t["llm_cache_hits"] for t in traces), "every model call was replayed"


def test_a_killed_kifqa_run_resumes_without_lost_or_duplicated_rows(cluster, replay, questions, asked, tmp_path):
    some = questions[:120]
    corpus, out = _write_corpus(tmp_path / "corpus.jsonl", some), tmp_path / "out"
    dump = replay.model_dump(mode="json", include={"data_dir", "cache_dir", "llm", "examples", "pipeline"})
    slow, fast = tmp_path / "slow.yaml", tmp_path / "fast.yaml"
    slow.write_text(yaml.safe_dump(dump | {"batch": {"shard_size": 10, "max_tasks": 1, "task_concurrency": 2}}))
    # Only speed settings differ: the rerun resumes the same job.
    fast.write_text(yaml.safe_dump(dump | {"batch": {"shard_size": 10, "max_tasks": 2, "task_concurrency": 10}}))
    options = [str(corpus), "--out", str(out), "--address", cluster, "--no-progress", "--config"]
    # The Ray Job entry point is killed; `kifqa run` (the same command) finishes the job.
    job = subprocess.Popen([sys.executable, str(REPO / "jobs" / "answer.py"), *options, str(slow)],
                           stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 180
        while len(RunFolder(out).finished()) < 3:
            assert job.poll() is None and time.time() < deadline, "the job ended before it was killed"
            time.sleep(0.05)
        job.kill()
    finally:
        job.wait()
    finished = len(RunFolder(out).finished())
    assert 3 <= finished < 12

    kifqa = Path(sys.executable).with_name("kifqa")
    rerun = subprocess.run([str(kifqa), "run", *options, str(fast)], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"{finished} of 12 shards already done" in rerun.stdout
    assert _batch_results(out) == {q.id: asked[q.id] for q in some}


def test_bad_rows_among_real_questions(cluster, replay, questions, asked, tmp_path):
    good = questions[:20]
    lines = [json.dumps({"id": q.id, "question": q.text}) for q in good]
    lines[5:5] = [json.dumps({"id": "empty", "question": ""}), json.dumps({"question": "where was x born"}),
                  json.dumps({"id": good[0].id, "question": "duplicate"}), json.dumps({"id": "big", "question": "x" * 100_000}),
                  '{"id": "broken", "question": "where']
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"

    summary = run_job(replay, corpus, out, progress=False)

    got = _batch_results(out)
    assert len(got) == 25 and summary.input_errors == 5
    bad = {qid: error for qid, (error, _) in got.items() if qid not in asked}
    assert bad == {"empty": "empty question", "#row7": "missing id",
                   f"{good[0].id}#row8": f"duplicate id '{good[0].id}' (first at row 1)",
                   "big": "question too long (100000 characters; limit 1000)",
                   "#row10": bad["#row10"]}
    assert bad["#row10"].startswith("broken JSON")
    assert {qid: got[qid] for qid in asked if qid in got} == {q.id: asked[q.id] for q in good}
