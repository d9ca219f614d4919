"""The batch job through fault-injecting proxies in front of the real Oxigraph server and of a model
server that answers from the replay cassette (the 0.5B model's recorded answers, over HTTP): with
faults it gives exactly the answers of a clean run; with the KB endpoint down it ends in bounded
time, every trace saying why, and ``--retry-failed`` completes the job once the endpoint is back.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import ray

from kifqa.batch import run_job
from kifqa.config import EndpointLimit, LLMResilience, Resilience, Settings
from kifqa.eval.datasets import load_sqwd
from kifqa.llm.base import ChatRequest, Message
from kifqa.llm.cache import request_key
from kifqa.types import Question
from tests.cassette import CASSETTES
from tests.fault_proxy import FaultProxy, Faults
from tests.llm_server import ChatServer

#: Questions of the faulty run (the issue's 200: about 100 s here, so it stays in the default suite).
N = 200
KB_LIMIT, LLM_LIMIT = 3, 4
#: 20 % of KB requests and 10 % of model requests get a fault, spread over every kind.
KB_FAULTS = Faults(throttle=0.02, unavailable=0.04, reset=0.03, hang=0.02, bad_body=0.03, cut_body=0.03,
                   max_rows=0.03, retry_after_s=1)
LLM_FAULTS = Faults(**dict.fromkeys(("throttle", "unavailable", "reset", "hang", "bad_body", "cut_body"), 0.1 / 6),
                    retry_after_s=1)

Answers = dict[str, tuple[str | None, set[tuple[str, ...]]]]


def cassette_reply(path: Path) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A chat server's reply function that answers what the cassette recorded for the same request."""
    db = sqlite3.connect(path, check_same_thread=False)
    [(identity,)] = db.execute("SELECT DISTINCT model FROM completions").fetchall()
    lock = threading.Lock()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        request = ChatRequest(messages=tuple(Message(m["role"], m["content"]) for m in body["messages"]),
                              grammar=body.get("grammar"), max_tokens=body["max_tokens"],
                              temperature=body["temperature"], stop=tuple(body.get("stop", ())))
        with lock:
            row = db.execute("SELECT text, prompt_tokens, completion_tokens FROM completions WHERE key = ?",
                             (request_key(identity, request)[0],)).fetchone()
        if row is None:
            return {"error": {"message": "not on the cassette"}}
        text, prompt, completion = row
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}

    return reply


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def model_server() -> Iterator[str]:
    with ChatServer(cassette_reply(CASSETTES / "batch.sqlite")) as server:
        yield server.url


@pytest.fixture(scope="module")
def questions(settings: Settings) -> list[Question]:
    return [Question(q.id, q.text) for q in load_sqwd(settings.data_dir, "valid", limit=N)]


def job_settings(settings: Settings, kb_url: str, llm_url: str, kb: dict[str, Any] | None = None,
                 llm: dict[str, Any] | None = None, batch: dict[str, Any] | None = None) -> Settings:
    """Settings of a job on the two endpoints, with retries sized for a 20 % fault rate; ``kb`` and
    ``llm`` change the endpoints' resilience settings."""
    return settings.model_copy(update={
        "kb": settings.kb.model_copy(update={
            "spec": f"sparql+wikidata:{kb_url}", "timeout_s": 2.0, "truncated_retries": 4, "max_concurrency": KB_LIMIT,
            "resilience": Resilience.model_validate(
                {"retries": 8, "backoff_s": 0.05, "max_backoff_s": 0.5} | (kb or {}))}),
        "llm": settings.llm.model_copy(update={
            "backend": "openai", "model": "qwen2.5-coder-0.5b", "base_url": llm_url, "cache": None,
            "max_concurrency": LLM_LIMIT, "timeout_s": 2.0,
            "resilience": LLMResilience.model_validate({"retries": 8, "max_backoff_s": 2.0} | (llm or {}))}),
        "batch": settings.batch.model_copy(update={
            "shard_size": 50, "max_tasks": 2, "task_concurrency": 16, "kb_cache": False, "llm_actor_cpus": 0,
            "limits": {"127.0.0.1": EndpointLimit(max_concurrent=KB_LIMIT)}} | (batch or {})),
    })


def write_corpus(path: Path, questions: list[Question]) -> Path:
    path.write_text("".join(json.dumps({"id": q.id, "question": q.text}) + "\n" for q in questions))
    return path


def results(out: Path) -> Answers:
    traces = pq.read_table(out / "traces", columns=["question_id", "error"]).to_pylist()
    got: Answers = {t["question_id"]: (t["error"], set()) for t in traces}
    assert len(got) == len(traces), "one trace row per question"
    for a in pq.read_table(out / "answers").to_pylist():
        got[a["question_id"]][1].add((a["answer"], a["subject"], a["property"], a["value"]))
    return got


@pytest.fixture(scope="module")
def clean(cluster, settings, built_kb, oxigraph_server, model_server, questions,
          tmp_path_factory) -> Callable[[int], Answers]:
    """The answers of the job on the two servers directly, for the first n questions (run once per n)."""
    done: dict[int, Answers] = {}

    def answers(n: int) -> Answers:
        if not (have := [k for k in done if k >= n]):
            tmp = tmp_path_factory.mktemp("clean")
            summary = run_job(job_settings(settings, oxigraph_server, model_server),
                              write_corpus(tmp / "corpus.jsonl", questions[:n]), tmp / "out", progress=False)
            assert summary.ok and summary.questions == n
            done[n] = results(tmp / "out")
            assert not [e for e, _ in done[n].values() if e and "cassette" in e], "every model call is recorded"
            assert sum(bool(a) for _, a in done[n].values()) > 0.8 * n
            have = [n]
        return {q.id: done[have[0]][q.id] for q in questions[:n]}

    return answers


def test_20_percent_kb_faults_and_10_percent_model_faults_change_no_answer(
        clean, settings, oxigraph_server, model_server, questions, tmp_path) -> None:
    n = N
    corpus = write_corpus(tmp_path / "corpus.jsonl", questions[:n])
    with FaultProxy(oxigraph_server, KB_FAULTS, seed=1) as kb, FaultProxy(model_server, LLM_FAULTS, seed=2) as llm:
        summary = run_job(job_settings(settings, kb.url, llm.url), corpus, tmp_path / "out", progress=False)
    assert summary.ok and summary.questions == n
    assert results(tmp_path / "out") == clean(n), "no question lost, every answer as in the clean run"
    for proxy, limit, share in ((kb, KB_LIMIT, 0.2), (llm, LLM_LIMIT, 0.1)):
        faults = sum(n for kind, n in proxy.counts.items() if kind != "ok")
        assert faults >= 0.5 * share * len(proxy.requests), proxy.counts
        assert len(set(proxy.counts) - {"ok"}) >= 3, proxy.counts  # each kind alone: test_faults_kb.py
        assert proxy.max_in_flight <= limit
        assert not proxy.retry_after_violations(), "no request while a Retry-After ran"


@pytest.mark.parametrize("dead", ["kb", "llm"])
def test_a_dead_endpoint_ends_the_job_in_bounded_time_and_retry_failed_completes_it(
        dead, clean, settings, oxigraph_server, model_server, questions, tmp_path) -> None:
    some = questions[:40]
    corpus, out = write_corpus(tmp_path / "corpus.jsonl", some), tmp_path / "out"
    upstream = oxigraph_server if dead == "kb" else model_server
    policy = {"breaker_failures": 5, "breaker_cooldown_s": 60}
    with FaultProxy(upstream) as proxy:
        urls = (proxy.url, model_server) if dead == "kb" else (oxigraph_server, proxy.url)
        # An outage longer than the job's limit (scaled down: 1 s) ends it.
        job = job_settings(settings, *urls, kb={"retries": 2} | policy, llm={"retries": 2} | policy,
                           batch={"max_outage_s": 1.0})
        proxy.down = True
        start = time.monotonic()
        first = run_job(job, corpus, out, progress=False)
        assert time.monotonic() - start < 60
        # the job's check that the endpoint is there (it takes the connection: an outage), then the
        # calls until the circuit opened
        assert proxy.counts["reset"] <= 1 + 5 + KB_LIMIT, "the open circuit stopped the calls"
        traces = pq.read_table(out / "traces", columns=["question_id", "error", "error_step"]).to_pylist()
        assert [t["question_id"] for t in traces] == [q.id for q in some]
        failed = [t for t in traces if t["error"]]
        assert first.errors == len(failed) >= 0.8 * len(some)
        for t in failed:
            if dead == "llm":
                assert t["error_step"] == "draft", t
            else:
                assert t["error_step"] in ("relations", "answers") or "no entity" in t["error"], t
            assert proxy.url.rsplit("/", 1)[0] in t["error"], t
            assert "circuit open" in t["error"] or "attempts" in t["error"], t
        assert sum("longer than the 1 s an outage may last" in t["error"] for t in failed) >= 0.5 * len(failed)

        proxy.down = False
        retry = job.model_copy(update={"batch": job.batch.model_copy(update={"retry_failed": True})})
        again = run_job(retry, corpus, out, progress=False)
    assert again.ran == len(failed)
    assert results(out) == clean(len(some))


def bring_back(proxy: FaultProxy, *, resets: int = 5, outage_s: float = 2.0) -> None:
    """Ends the proxy's outage ``outage_s`` after it has reset ``resets`` requests (the circuit is open
    by then), or after a minute."""
    start = time.monotonic()
    while proxy.counts["reset"] < resets and time.monotonic() - start < 60:
        time.sleep(0.05)
    time.sleep(outage_s)
    proxy.down = False


@pytest.mark.parametrize("down", ["kb", "llm"])
def test_an_outage_shorter_than_the_limit_costs_no_question(
        down, clean, settings, oxigraph_server, model_server, questions, tmp_path) -> None:
    """Batch semantics, scaled down: while the circuit is open questions wait; a 2-s outage against a
    10-s limit delays the job and loses nothing."""
    some = questions[:40]
    corpus, out = write_corpus(tmp_path / "corpus.jsonl", some), tmp_path / "out"
    upstream = oxigraph_server if down == "kb" else model_server
    policy = {"breaker_failures": 5, "breaker_cooldown_s": 0.5, "max_backoff_s": 0.5}
    with FaultProxy(upstream) as proxy:
        urls = (proxy.url, model_server) if down == "kb" else (oxigraph_server, proxy.url)
        job = job_settings(settings, *urls, kb={"retries": 2} | policy, llm={"retries": 2} | policy,
                           batch={"max_outage_s": 10.0})
        proxy.down = True
        back = threading.Thread(target=bring_back, args=(proxy,), daemon=True)
        back.start()
        summary = run_job(job, corpus, out, progress=False)
        back.join()
    assert proxy.counts["reset"] >= 5, "the endpoint was down while the job ran"
    assert summary.ok and summary.errors == 0
    assert results(out) == clean(len(some))
