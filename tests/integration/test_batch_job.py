"""The batch job on a real local Ray cluster, with in-memory KB and model doubles (``tests/fakes.py``).

The doubles are pickled by value, so the Ray workers need not import this module or ``tests.fakes``. The same job
with the real pipeline, the local KB and a replay cassette is in ``test_batch_pipeline.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
import ray

import tests.fakes
from kifqa.batch import actor_pools, run_job
from kifqa.batch.driver import Progress
from kifqa.batch.kbpool import ActorKB, start_kb_pool
from kifqa.batch.limiter import EndpointLimiter
from kifqa.batch.task import report_circuits
from kifqa.config import EndpointLimit, Settings
from kifqa.errors import ConfigError, KBError, LLMError
from kifqa.examples.sources import FixedExamples
from kifqa.kb.base import KnowledgeBase
from kifqa.llm.base import LLM, ChatRequest, Completion, Message
from kifqa.resilience import Endpoint, Failure, GaveUp, RetryPolicy
from kifqa.runs import RunFolder
from kifqa.types import Answer, Candidate, Question, Result, Trace
from tests.fakes import FakeKB, FakeLLM

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ray.cloudpickle.register_pickle_by_value(tests.fakes)


class ThrottledKB(FakeKB):
    """Its search for 'busy' fails the way a KB call fails after an endpoint kept answering 429."""

    async def search_entities(self, text: str, *, limit: int = 10) -> list[Candidate]:
        if text == "busy":
            request = httpx.Request("GET", "https://kb.example.org/sparql")
            try:
                httpx.Response(429, headers={"Retry-After": "1"}, request=request).raise_for_status()
            except httpx.HTTPStatusError as err:
                raise KBError("search failed after 4 attempts: HTTP 429") from err
        return await super().search_entities(text, limit=limit)


class FakePipeline:
    """One model call and two KB calls per question; flag files make chosen questions misbehave."""

    def __init__(self, *, kb: KnowledgeBase, llm: LLM, settings: Settings, flags: Path) -> None:
        self.kb, self.llm = kb, llm
        self.flags = flags
        self.examples = FixedExamples()  # no block shared: the shard's order stays

    def prepare(self, questions: list[Question]) -> None:
        """Nothing to compute ahead."""

    async def answer(self, question: Question) -> Result:
        trace = Trace(question.id, question.text, kb=self.kb.spec, model=self.llm.identity)
        if (self.flags / f"crash-{question.id}").exists():
            (self.flags / f"crash-{question.id}").unlink()
            os._exit(1)  # the worker dies: Ray reruns the whole shard task
        if (self.flags / f"fail-{question.id}").exists():
            trace.error, trace.error_step = "told to fail", "draft"
            return Result(question, [], trace)
        [out] = await self.llm.agenerate([ChatRequest(messages=(Message("user", question.text),))])
        [entity] = await self.kb.search_entities(question.text)
        found = await self.kb.facts(entity.id, out.text, "forward")
        trace.kb_calls = 2
        trace.n_answers = len(found.facts)
        return Result(question, [Answer(fact=f, answer=f.value, answer_label=f.value_label) for f in found.facts], trace)


def fakes(flags: Path, *, kb_log: Path | None = None, llm_delay: float = 0.002) -> dict[str, Any]:
    """The ``run_job`` arguments that swap in the doubles."""
    return {"pipeline": partial(FakePipeline, flags=flags), "open_kb": partial(FakeKB, log=kb_log and str(kb_log)),
            "open_llm": partial(FakeLLM, delay=llm_delay)}


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _settings(tmp_path: Path, **batch) -> Settings:
    settings = Settings(cache_dir=tmp_path / "cache")
    # What these tests count on, not `auto`: one actor each, the knowledge base in a KB actor.
    one_each = {"shard_size": 10, "llm_actors": 1, "kb_actors": 1, "kb_placement": "actors"}
    return settings.model_copy(update={"batch": settings.batch.model_copy(update={**one_each, **batch})})


def _corpus(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"where was person {i} born"}) + "\n"
                            for i in range(n)))
    return path


def _rows(out: Path) -> tuple[list[str], list[str]]:
    traces = pq.read_table(out / "traces", columns=["question_id"])["question_id"].to_pylist()
    answers = pq.read_table(out / "answers", columns=["question_id"])["question_id"].to_pylist()
    return traces, answers


def test_bad_rows_get_error_traces_and_the_rest_answers(cluster, tmp_path, flags):
    good = [{"id": f"g{i}", "question": f"who is person {i}"} for i in range(25)]
    lines = [json.dumps(r) for r in good[:10]] + [
        json.dumps({"id": "e1", "question": ""}),
        json.dumps({"question": "no id"}),
        json.dumps({"id": "g3", "question": "duplicate"}),
        json.dumps({"id": "e2", "question": "y" * 100_000}),
        '{"id": "e3", "question": ',
        json.dumps({"id": "e4", "question": ["not", "text"]}),
    ] + [json.dumps(r) for r in good[10:]]
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"

    summary = run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))

    traces = pq.read_table(out / "traces").to_pylist()
    assert len(traces) == 31 and len({t["question_id"] for t in traces}) == 31
    errors = {t["question_id"]: t["error"] for t in traces if t["error"]}
    assert set(errors) == {"e1", "#row12", "g3#row13", "e2", "#row15", "e4"}
    assert all(t["error_step"] == "input" for t in traces if t["error"])
    assert {a["question_id"] for a in pq.read_table(out / "answers").to_pylist()} == {r["id"] for r in good}
    assert (summary.questions, summary.answered, summary.errors, summary.input_errors) == (31, 25, 6, 6)
    assert summary.shards == 4 and summary.ran == 31 and summary.ok
    assert summary.first_answer_s > 0  # noticed without a progress bar too
    assert summary.llm_calls_per_question == 0 and summary.kb_calls_per_question == pytest.approx(50 / 31)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["corpus"]["input_errors"] == 6

    again = run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    assert (again.ran, again.shards_skipped, again.questions) == (0, 4, 31)
    assert len(json.loads((out / "manifest.json").read_text())["runs"]) == 2


def test_a_killed_worker_reruns_its_shard_without_duplicates(cluster, tmp_path, flags):
    (flags / "crash-q13").touch()
    out = tmp_path / "out"
    summary = run_job(_settings(tmp_path), _corpus(tmp_path, 30), out, progress=False, **fakes(flags))
    assert not (flags / "crash-q13").exists(), "the worker did crash"
    traces, answers = _rows(out)
    assert sorted(traces) == sorted(f"q{i}" for i in range(30)) and sorted(answers) == sorted(traces)
    assert summary.ok and summary.answered == 30


@pytest.mark.slow  # the default suite kills the real pipeline's job: test_batch_pipeline.py
def test_killing_the_job_midway_then_rerunning_loses_and_duplicates_nothing(cluster, tmp_path, flags):
    corpus, out = _corpus(tmp_path, 120), tmp_path / "out"
    script = tmp_path / "driver.py"
    script.write_text(
        "import sys, ray\n"
        f"sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[2])!r}]\n"
        "import test_batch_job as t\n"
        f"ray.init(address={cluster!r}, log_to_driver=False)\n"
        "ray.cloudpickle.register_pickle_by_value(t)\n"
        f"t.run_job(t._settings(t.Path({str(tmp_path)!r}), max_tasks=1), {str(corpus)!r}, {str(out)!r},"
        f" progress=False, **t.fakes(t.Path({str(flags)!r}), llm_delay=0.1))\n")
    driver = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.time() + 120
        while len(RunFolder(out).finished()) < 2:
            assert driver.poll() is None and time.time() < deadline, "the job ended before it was killed"
            time.sleep(0.1)
        driver.kill()
    finally:
        driver.wait()
    done_before = RunFolder(out).finished()
    assert 2 <= len(done_before) < 12

    summary = run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    assert summary.shards_skipped == len(done_before) and summary.ran == 120 - 10 * len(done_before)
    traces, answers = _rows(out)
    assert sorted(traces) == sorted(f"q{i}" for i in range(120))
    assert sorted(answers) == sorted(traces)
    assert not [p for p in (out / "traces").iterdir() if p.name.startswith(".tmp")]


def test_retry_failed_reruns_only_failed_questions(cluster, tmp_path, flags):
    corpus, out = _corpus(tmp_path, 20), tmp_path / "out"
    (flags / "fail-q4").touch()
    (flags / "fail-q15").touch()
    first = run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    assert first.errors == 2 and first.answered == 18

    (flags / "fail-q4").unlink()
    again = run_job(_settings(tmp_path, retry_failed=True), corpus, out, progress=False, **fakes(flags))
    assert again.ran == 2 and again.errors == 1 and again.answered == 19
    traces, answers = _rows(out)
    assert traces == [f"q{i}" for i in range(20)], "one row each, in corpus order"
    assert sorted(answers) == sorted(f"q{i}" for i in range(20) if i != 15)


def test_another_config_in_the_same_folder_needs_no_resume(cluster, tmp_path, flags):
    corpus, out = _corpus(tmp_path, 5), tmp_path / "out"
    run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    with pytest.raises(ConfigError, match="another job"):
        run_job(_settings(tmp_path, shard_size=2), corpus, out, progress=False, **fakes(flags))
    summary = run_job(_settings(tmp_path, shard_size=2, resume=False), corpus, out, progress=False, **fakes(flags))
    assert summary.shards == 3 and summary.ran == 5 and len(RunFolder(out).finished()) == 3


def test_kb_actors_share_one_endpoint_limit_and_the_cache(cluster, tmp_path, flags):
    log = tmp_path / "kb.log"
    settings = _settings(tmp_path, kb_actors=3, limits={"kb.example.org": EndpointLimit(max_concurrent=2, per_second=40)})
    settings = settings.model_copy(update={"kb": settings.kb.model_copy(update={"spec": "sparql+wikidata:https://kb.example.org/sparql"})})
    corpus, out = _corpus(tmp_path, 40), tmp_path / "out"
    first = run_job(settings, corpus, out, progress=False, **fakes(flags, kb_log=log))

    calls = sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())
    assert len(calls) == 80 and first.kb_cache_hit_rate == 0
    events = sorted([(s, 1) for s, _ in calls] + [(e, -1) for _, e in calls], key=lambda x: (x[0], x[1]))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak <= 2, "at most 2 calls in flight across all KB actors"
    starts = [s for s, _ in calls]
    assert (starts[-1] - starts[0]) >= 79 / 40 * 0.9, "no more than 40 calls started per second"

    log.unlink()
    rerun = run_job(settings.model_copy(update={"batch": settings.batch.model_copy(update={"resume": False})}),
                    corpus, out, progress=False, **fakes(flags, kb_log=log))
    assert rerun.kb_cache_hit_rate == 1.0 and not log.exists(), "a rerun is answered from the KB cache"


def test_a_retry_after_pauses_every_kb_actor(cluster, tmp_path):
    limiter = EndpointLimiter.remote(EndpointLimit(max_concurrent=2))
    actors = start_kb_pool(_settings(tmp_path, kb_actors=2, kb_cache=False), ThrottledKB, limiter)
    kb = ActorKB(actors, "sparql+wikidata:https://kb.example.org/sparql")

    async def calls() -> float:
        await asyncio.gather(*(kb.search_entities(f"warm {i}") for i in range(4)))
        with pytest.raises(KBError, match="HTTP 429"):
            await kb.search_entities("busy")
        start = time.perf_counter()
        await asyncio.gather(*(kb.search_entities(f"q{i}") for i in range(4)))
        return time.perf_counter() - start

    assert asyncio.run(calls()) >= 0.9, "the endpoint's Retry-After held back both actors"
    for actor in [*actors, limiter]:
        ray.kill(actor)


def test_the_search_service_has_its_own_lane_of_the_limit(cluster):
    """The Wikidata API's one request in flight is held apart from WDQS's five: a search waits for the search
    lane only."""
    limiter = EndpointLimiter.remote(EndpointLimit(max_concurrent=5), EndpointLimit(max_concurrent=1))

    async def lanes() -> None:
        assert await limiter.lanes.remote() == ["store", "search"]
        await limiter.acquire.remote("a", "search")
        second = asyncio.ensure_future(asyncio.wrap_future(limiter.acquire.remote("b", "search").future()))
        await asyncio.wait_for(asyncio.gather(*(limiter.acquire.remote("c", "store") for _ in range(2))), 10)
        await asyncio.sleep(0.3)
        assert not second.done(), "a second search waits while one is in flight"
        await limiter.release.remote("a", None, "search")
        await asyncio.wait_for(second, 10)

    asyncio.run(lanes())
    ray.kill(limiter)


def test_jobs_share_running_pools(cluster, tmp_path, flags):
    settings, doubles = _settings(tmp_path), fakes(flags)
    corpus = _corpus(tmp_path, 5)
    with actor_pools(settings, open_kb=doubles["open_kb"], open_llm=doubles["open_llm"]) as pools:
        first = run_job(settings, corpus, tmp_path / "a", pools=pools, pipeline=doubles["pipeline"], progress=False)
        second = run_job(settings, corpus, tmp_path / "b", pools=pools, pipeline=doubles["pipeline"], progress=False)
        with pytest.raises(ConfigError, match="actor pools"):
            run_job(_settings(tmp_path, kb_actors=2), corpus, tmp_path / "c", pools=pools, progress=False)
    assert first.answered == second.answered == 5 and first.startup_s == second.startup_s == 0
    assert second.kb_cache_hit_rate == 1.0


class DownKB(FakeKB):
    """A knowledge base whose endpoint was found down when it was opened (its circuit is open)."""

    LABEL = "http://kb.example.org/sparql (store)"

    def __init__(self, spec: str, settings: Settings) -> None:
        super().__init__(spec, settings)
        self.endpoint = Endpoint("kb", RetryPolicy(retries=0, breaker_failures=1, breaker_cooldown_s=600),
                                 label=self.LABEL)

        async def refused() -> None:
            raise httpx.ConnectError("connection refused")

        async def fail() -> None:
            with contextlib.suppress(GaveUp):
                await self.endpoint.run(refused, lambda err: Failure("connection", str(err)))

        opening = threading.Thread(target=asyncio.run, args=(fail(),))  # the actor's loop is running
        opening.start()
        opening.join()


def test_the_pools_tell_which_endpoint_is_down_and_for_how_long(cluster, tmp_path, flags):
    doubles = fakes(flags)
    with actor_pools(_settings(tmp_path), open_kb=DownKB, open_llm=doubles["open_llm"]) as pools:
        first = pools.open_circuits()
        time.sleep(1.1)
        later = pools.open_circuits()
    assert list(first) == list(later) == [DownKB.LABEL]
    assert 0 <= first[DownKB.LABEL] < 60 and later[DownKB.LABEL] >= first[DownKB.LABEL] + 1


def test_a_task_with_its_own_kb_tells_the_driver_which_endpoint_is_down(cluster):
    counter = Progress.remote()

    @ray.remote(num_cpus=0)
    def task() -> None:
        DownKB("local", Settings())  # its endpoint's circuit opens in this worker

        async def report_for_a_while() -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(report_circuits(counter), 1.5)

        asyncio.run(report_for_a_while())

    ray.get(task.remote())
    down = ray.get(counter.open_circuits.remote())
    assert list(down) == [DownKB.LABEL] and 0 <= down[DownKB.LABEL] < 60
    ray.kill(counter)


def _unbuilt_kb(spec: str, settings: Settings) -> KnowledgeBase:
    raise KBError("no knowledge base is built; run `kifqa kb build`")


def test_a_kb_that_cannot_be_opened_fails_the_job_with_its_own_error(cluster, tmp_path, flags):
    with pytest.raises(KBError, match="run `kifqa kb build`"):
        run_job(_settings(tmp_path), _corpus(tmp_path, 3), tmp_path / "out", progress=False,
                **fakes(flags) | {"open_kb": _unbuilt_kb})


class SlowLoadingLLM(FakeLLM):
    """Takes ``load_s`` over its first call (the actor's warm-up: a model loading), then records when it was loaded
    in ``<cache_dir>/loaded``."""

    def __init__(self, settings: Settings, *, load_s: float) -> None:
        super().__init__(settings)
        self.load_s, self.witness = load_s, Path(settings.cache_dir) / "loaded"

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        if not self.witness.exists():
            await asyncio.sleep(self.load_s)
            self.witness.write_text(str(time.time()))
        return await super().agenerate(requests)


class PreparingPipeline(FakePipeline):
    """Records in ``<flags>/prepared`` when its task prepared its questions."""

    def prepare(self, questions: list[Question]) -> None:
        (self.flags / "prepared").write_text(str(time.time()))


def test_the_tasks_prepare_their_questions_while_the_model_loads(cluster, tmp_path, flags):
    settings = _settings(tmp_path)
    settings.cache_dir.mkdir(parents=True)
    summary = run_job(settings, _corpus(tmp_path, 5), tmp_path / "out", progress=False,
                      **fakes(flags) | {"pipeline": partial(PreparingPipeline, flags=flags),
                                        "open_llm": partial(SlowLoadingLLM, load_s=5.0)})
    assert summary.answered == 5 and summary.startup_s >= 5.0
    assert float((flags / "prepared").read_text()) < float((settings.cache_dir / "loaded").read_text())


def _missing_model(settings: Settings) -> LLM:
    raise LLMError("no model file; run `kifqa model fetch`")


def test_a_model_that_cannot_be_opened_fails_the_job_before_any_answer(cluster, tmp_path, flags):
    with pytest.raises(LLMError, match="run `kifqa model fetch`"):
        run_job(_settings(tmp_path), _corpus(tmp_path, 3), tmp_path / "out", progress=False,
                **fakes(flags) | {"open_llm": _missing_model})
    assert RunFolder(tmp_path / "out").finished() == set()


class HangingLLM(LLM):
    """Never answers; records in ``<cache_dir>/cancelled`` that its call was cancelled."""

    identity = "hanging-llm"

    def __init__(self, settings: Settings) -> None:
        self.witness = Path(settings.cache_dir) / "cancelled"

    async def agenerate(self, requests):
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            self.witness.write_text("yes")
            raise
        return []


def test_a_question_timeout_cancels_the_model_call_in_the_actor(cluster, tmp_path):
    from kifqa.batch.llmpool import ActorLLM, start_llm_pool

    settings = _settings(tmp_path, llm_actor_cpus=0, llm_actors=1)
    settings.cache_dir.mkdir(parents=True)
    [actor] = start_llm_pool(settings, HangingLLM).actors
    ray.get(actor.busy_seconds.remote())  # started: the call below reaches the model
    llm = ActorLLM([actor], "hanging-llm")
    request = ChatRequest(messages=(Message("user", "hi"),))

    async def timed_out() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(llm.agenerate([request]), 1.0)  # what batch.question_timeout_s does

    asyncio.run(timed_out())
    deadline = time.monotonic() + 20
    while not (settings.cache_dir / "cancelled").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (settings.cache_dir / "cancelled").exists(), "the actor's model call was cancelled, not left running"
    ray.kill(actor)


class EchoLLM(LLM):
    """Answers each request with its text; appends each call's size to ``<cache_dir>/calls``."""

    identity = "echo-llm"

    def __init__(self, settings: Settings) -> None:
        self.witness = Path(settings.cache_dir) / "calls"

    async def agenerate(self, requests):
        with self.witness.open("a") as out:
            out.write(f"{len(requests)}\n")
        if any(r.messages[0].content == "slow" for r in requests):
            await asyncio.sleep(1.0)
        return [Completion(text=r.messages[0].content) for r in requests]


def test_requests_made_together_reach_the_actor_in_one_call(cluster, tmp_path):
    from kifqa.batch.llmpool import ActorLLM, start_llm_pool

    settings = _settings(tmp_path, llm_actor_cpus=0, llm_actors=1)
    settings.cache_dir.mkdir(parents=True)
    [actor] = start_llm_pool(settings, EchoLLM).actors
    ray.get(actor.busy_seconds.remote())
    llm = ActorLLM([actor], "echo-llm", per_call=16)
    calls = settings.cache_dir / "calls"

    def ask(text: str) -> ChatRequest:
        return ChatRequest(messages=(Message("user", text),))

    async def questions() -> None:
        # Twelve questions reach the model step in one turn of the loop: one call, each its own answer.
        got = await asyncio.gather(*(llm.agenerate([ask(f"q{i}")]) for i in range(12)))
        assert [c.text for [c] in got] == [f"q{i}" for i in range(12)]
        assert calls.read_text().split() == ["12"]
        # One that comes later goes alone, and a caller that gives up does not cost the others their answers.
        assert [c.text for c in await llm.agenerate([ask("late")])] == ["late"]
        given_up = asyncio.ensure_future(asyncio.wait_for(llm.agenerate([ask("slow")]), 0.2))
        kept = asyncio.ensure_future(llm.agenerate([ask("kept")]))
        with pytest.raises(TimeoutError):
            await given_up
        assert [c.text for c in await kept] == ["kept"]
        assert calls.read_text().split() == ["12", "1", "2"]
        assert llm._pool._in_flight == [0]

    asyncio.run(questions())

    async def next_task(llm: ActorLLM) -> list[str]:  # a worker keeps the model's proxy for its next shard,
        return [c.text for [c] in await asyncio.gather(llm.agenerate([ask("a")]), llm.agenerate([ask("b")]))]

    assert asyncio.run(next_task(llm)) == ["a", "b"]  # ... on a new loop
    assert calls.read_text().split() == ["12", "1", "2", "2"]
    # A backend that answers requests one after another (llama.cpp's default) is sent them one a call, so that
    # no question waits for another's answer.
    assert asyncio.run(next_task(ActorLLM([actor], "echo-llm", per_call=1))) == ["a", "b"]
    assert calls.read_text().split() == ["12", "1", "2", "2", "1", "1"]
    ray.kill(actor)
