"""The ``openai`` backend against a real local HTTP server speaking the chat-completions API."""

from __future__ import annotations

import asyncio
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kifqa.config import LLMResilience, LLMSettings, Settings
from kifqa.errors import ConfigError
from kifqa.llm import ChatRequest, Message, OpenAILLM, open_llm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from llm_server import ChatServer, Fault  # noqa: E402

GRAMMAR = 'root ::= "(" [a-z ]+ " | " [a-z ]+ " | ?x)"'


def ask(text: str, *, grammar: str | None = None) -> ChatRequest:
    return ChatRequest(messages=(Message("system", "Be brief."), Message("user", text)), grammar=grammar, max_tokens=16)


def client(chat: ChatServer, *, resilience: dict[str, object] | None = None, **kwargs: Any) -> OpenAILLM:
    policy = LLMResilience.model_validate({"retries": 3, "max_backoff_s": 0.2} | (resilience or {}))
    options: dict[str, Any] = {"timeout_s": 2.0, "resilience": policy} | kwargs
    return OpenAILLM(model="test-model", base_url=chat.url, **options)


def test_answers_and_reports_usage() -> None:
    with ChatServer() as server:
        llm = client(server, server="llamacpp", api_key="sk-test", body={"top_k": 1})
        (done,) = llm.generate([ask("where was ada lovelace born", grammar=GRAMMAR)])
    assert done.ok, done.error
    assert done.text == "echo: where was ada lovelace born"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.cached_prompt_tokens) == (7, 6, 3)
    assert done.usage.latency_s > 0 and not done.usage.cache_hit
    sent = server.requests[0]
    assert sent["model"] == "test-model" and sent["max_tokens"] == 16 and sent["temperature"] == 0.0
    assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "where was ada lovelace born"}]
    assert sent["grammar"] == GRAMMAR and sent["top_k"] == 1
    assert server.headers[0]["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(("family", "expected"), [
    ("llamacpp", {"grammar": GRAMMAR}),
    ("vllm", {"structured_outputs": {"grammar": GRAMMAR}}),
    ("vllm-legacy", {"guided_grammar": GRAMMAR}),
    ("openai", {}),
])
def test_grammar_goes_where_the_server_family_reads_it(family: str, expected: dict) -> None:
    fields = {"grammar", "structured_outputs", "guided_grammar"}
    with ChatServer() as server:
        llm = client(server, server=family)
        llm.generate([ask("q", grammar=GRAMMAR), ask("no grammar")])
    by_question = {r["messages"][-1]["content"]: r for r in server.requests}
    with_grammar, without = by_question["q"], by_question["no grammar"]
    assert {k: v for k, v in with_grammar.items() if k in fields} == expected
    assert not fields & without.keys()


def test_429_honours_retry_after_then_succeeds() -> None:
    with ChatServer() as server:
        server.fail(Fault(429, headers={"Retry-After": "1"}))
        llm = client(server, resilience={"max_backoff_s": 5.0})
        start = time.perf_counter()
        (done,) = llm.generate([ask("q")])
        elapsed = time.perf_counter() - start
    assert done.ok, done.error
    assert len(server.requests) == 2
    assert elapsed >= 0.95  # waited as told (backoff alone would wait at most 0.5 s)


def test_server_errors_and_a_dropped_connection_are_retried() -> None:
    with ChatServer() as server:
        server.fail(Fault(500), Fault(503), Fault(drop=True))
        (done,) = client(server).generate([ask("q")])
    assert done.ok, done.error
    assert len(server.requests) == 4


def test_a_hung_attempt_times_out_and_is_retried() -> None:
    with ChatServer() as server:
        server.fail(Fault(delay_s=3.0))
        start = time.perf_counter()
        (done,) = client(server, timeout_s=0.5).generate([ask("q")])
    assert done.ok, done.error
    assert time.perf_counter() - start < 2.5
    assert len(server.requests) == 2


def test_persistent_failures_become_a_clear_error_in_bounded_time() -> None:
    with ChatServer() as server:
        server.persistent = Fault(500)
        start = time.perf_counter()
        results = client(server, resilience={"retries": 2}).generate([ask("a"), ask("b")])
        elapsed = time.perf_counter() - start
    assert elapsed < 3.0
    for done in results:
        assert not done.ok and done.text == ""
        assert "HTTP 500" in done.error and "injected 500" in done.error and "gave up after 3 attempts" in done.error
    assert len(server.requests) == 6


def test_persistent_hangs_never_hang_the_caller() -> None:
    with ChatServer() as server:
        server.persistent = Fault(delay_s=30.0)
        start = time.perf_counter()
        (done,) = client(server, timeout_s=0.3, resilience={"retries": 1}).generate([ask("q")])
        elapsed = time.perf_counter() - start
    assert not done.ok and "no answer within 0.3 s" in done.error
    assert elapsed < 2.0


def test_a_question_timeout_cancels_the_request_and_frees_its_capacity() -> None:
    with ChatServer() as server:
        server.fail(Fault(delay_s=30.0))  # the first request hangs; later ones answer at once
        llm = client(server, timeout_s=60.0, max_concurrency=1)

        async def main() -> str:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(llm.agenerate([ask("hangs")]), 0.5)  # as batch.question_timeout_s does
            (done,) = await asyncio.wait_for(llm.agenerate([ask("next")]), 5.0)  # the one slot is free again
            return done.text

        assert asyncio.run(main()) == "echo: next"


def test_connection_refused_is_an_error_after_retries() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAILLM(model="m", base_url=f"http://127.0.0.1:{port}/v1",
                    resilience=LLMResilience(retries=1, max_backoff_s=0.1))
    (done,) = llm.generate([ask("q")])
    assert not done.ok and "ConnectError" in done.error and "gave up after 2 attempts" in done.error


@pytest.mark.parametrize(("fault", "message"), [
    (Fault(200, body='{"object": "chat.completion", "choices": []}'), "no choices"),
    (Fault(200, body='{"choices": [{"message": {"role": "assistant"}}]}'), "no message content"),
    (Fault(200, body="[1, 2]"), "expected a JSON object"),
    (Fault(200, body='{"error": {"message": "model overloaded"}}'), "model overloaded"),
    (Fault(400), "HTTP 400: injected 400"),
])
def test_unusable_answers_are_per_request_errors_without_retries(fault: Fault, message: str) -> None:
    with ChatServer() as server:
        server.fail(fault)
        llm = client(server)
        (bad,) = llm.generate([ask("first")])
        (good,) = llm.generate([ask("second")])
    assert not bad.ok and message in bad.error
    assert good.ok and good.text == "echo: second"
    assert len(server.requests) == 2  # none of these is retried


def test_a_body_that_is_not_json_is_retried_then_reported() -> None:
    with ChatServer() as server:
        server.fail(Fault(200, body="<html>gateway</html>"), Fault(200, body='{"choices": [{"mess'))
        (done,) = client(server).generate([ask("q")])
        server.persistent = Fault(200, body="<html>gateway</html>")
        (bad,) = client(server, resilience={"retries": 1}).generate([ask("q")])
    assert done.ok and done.text == "echo: q"
    assert not bad.ok and "the body is not JSON" in bad.error and "gave up after 2 attempts" in bad.error
    assert len(server.requests) == 5


def test_concurrency_is_bounded() -> None:
    with ChatServer(delay_s=0.1) as server:
        results = client(server, max_concurrency=2).generate([ask(f"q{i}") for i in range(8)])
    assert [r.text for r in results] == [f"echo: q{i}" for i in range(8)]
    assert server.max_in_flight == 2


def test_many_concurrent_callers_on_one_loop_share_the_bound() -> None:
    async def main(llm: OpenAILLM) -> list[list[str]]:
        batches = await asyncio.gather(*(llm.agenerate([ask(f"{b}-{i}") for i in range(3)]) for b in range(4)))
        return [[c.text for c in batch] for batch in batches]

    with ChatServer(delay_s=0.05) as server:
        texts = asyncio.run(main(client(server, max_concurrency=3)))
    assert texts == [[f"echo: {b}-{i}" for i in range(3)] for b in range(4)]
    assert server.max_in_flight == 3


def test_open_llm_builds_the_openai_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_KEY", "sk-env")
    with ChatServer() as server:
        settings = Settings(llm=LLMSettings(backend="openai", model="served", base_url=server.url,
                                            api_key_env="TEST_KEY", server="vllm",
                                            resilience={"retries": 1, "breaker_failures": 2}))
        llm = open_llm(settings)
        assert isinstance(llm, OpenAILLM)
        policy = llm.endpoint.policy
        # the section's own settings, over the model server's defaults (a 30-s cap, also on Retry-After)
        assert (policy.retries, policy.breaker_failures) == (1, 2)
        assert policy.max_backoff_s == policy.max_retry_after_s == 30
        (done,) = llm.generate([ask("q", grammar=GRAMMAR)])
    assert done.ok and llm.identity == "openai/vllm:served"
    assert server.headers[0]["authorization"] == "Bearer sk-env"
    assert server.requests[0]["structured_outputs"] == {"grammar": GRAMMAR}


def test_open_llm_needs_a_base_url() -> None:
    with pytest.raises(ConfigError, match="base_url"):
        open_llm(Settings(llm=LLMSettings(backend="openai")))


def test_a_dead_server_opens_the_circuit_and_requests_fail_fast() -> None:
    with ChatServer() as server:
        server.persistent = Fault(503)
        llm = client(server, max_concurrency=2,
                     resilience={"retries": 2, "breaker_failures": 4, "breaker_cooldown_s": 0.5})
        start = time.perf_counter()
        results = llm.generate([ask(f"q{i}") for i in range(6)])
        elapsed = time.perf_counter() - start
        assert elapsed < 2.0 and len(server.requests) <= 5, "at most the one in flight when it opened"
        assert all(not r.ok for r in results)
        assert any(re.search(r"circuit open after [45] consecutive failures", r.error) and "HTTP 503" in r.error
                   for r in results), "two requests are in flight: the one failing after the circuit opened counts too"
        server.persistent = None
        time.sleep(0.5)
        (probe,) = llm.generate([ask("back")])
    assert probe.ok and probe.text == "echo: back"


def test_retry_after_holds_every_request_to_the_server() -> None:
    with ChatServer(delay_s=0.05) as server:
        server.fail(Fault(429, headers={"Retry-After": "1"}))
        llm = client(server, resilience={"max_backoff_s": 5.0}, max_concurrency=1)
        start = time.perf_counter()
        results = llm.generate([ask("a"), ask("b"), ask("c")])
    assert all(r.ok for r in results)
    assert time.perf_counter() - start >= 1.0
    assert len(server.requests) == 4
