"""The ``local`` backend with the real 0.5B model (llama.cpp in-process through xllamacpp)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
import threading
import time
from collections.abc import Iterator

import pytest

from kifqa.config import Settings
from kifqa.examples.sources import FixedExamples
from kifqa.llm import ChatRequest, LocalLLM, Message
from kifqa.pipeline import draft

pytest.importorskip("xllamacpp", reason="the local backend needs xllamacpp: pip install 'kifqa[local]'")

MODEL = "qwen2.5-coder-0.5b"
#: A test grammar for one line ``(subject, predicate, ?x)``.
TRIPLE = r"""root ::= "(" term ", " term ", ?x)"
term ::= [a-z0-9] [a-z0-9 .'-]{0,30}"""
TRIPLE_LINE = re.compile(r"\([a-z0-9][a-z0-9 .'-]{0,30}, [a-z0-9][a-z0-9 .'-]{0,30}, \?x\)")
SYSTEM = (
    "Translate the question into a knowledge-graph triple (subject, predicate, ?x), where ?x is "
    "the answer. Examples:\n"
    "Q: where was james brown born\nA: (james brown, place of birth, ?x)\n"
    "Q: what is the nationality of kim jong-un\nA: (kim jong-un, country of citizenship, ?x)\n"
    "Q: what genre is the album thriller\nA: (thriller, genre, ?x)"
)


def ask(question: str, *, grammar: str | None = TRIPLE) -> ChatRequest:
    return ChatRequest(messages=(Message("system", SYSTEM), Message("user", question)), grammar=grammar,
                       max_tokens=32)


@pytest.fixture(scope="module")
def llm() -> Iterator[LocalLLM]:
    model = LocalLLM(model=MODEL, cache_dir=Settings().cache_dir, parallel=2, decoding=2, context=1024)
    model.load()
    yield model
    asyncio.run(model.aclose())


def test_answers_a_question_with_a_grammar_valid_triple(llm: LocalLLM) -> None:
    (done,) = llm.generate([ask("who wrote the novel dracula")])
    assert done.ok, done.error
    assert TRIPLE_LINE.fullmatch(done.text), done.text
    assert "dracula" in done.text
    assert done.usage.prompt_tokens > 80 and 0 < done.usage.completion_tokens <= 32
    assert done.usage.latency_s > 0 and done.usage.generation_s > 0


def test_each_completion_token_comes_with_its_logprob(llm: LocalLLM) -> None:
    cut, done = llm.generate([dataclasses.replace(ask("who wrote the novel dracula"), max_tokens=4),
                              ask("who wrote the novel dracula")])
    assert cut.ok and done.ok, (cut.error, done.error)
    assert len(cut.logprobs) == cut.usage.completion_tokens == 4  # cut short: every token is text
    # Stopped by the model: llama.cpp counts the end-of-generation token, which is no text and streams no logprob.
    assert len(done.logprobs) == done.usage.completion_tokens - 1 > 4
    assert all(math.isfinite(lp) and lp <= 0 for lp in done.logprobs) and min(done.logprobs) < 0


def test_a_forward_draft_stops_before_its_fixed_end(llm: LocalLLM) -> None:
    question = "where was james brown born"
    stopped = draft.request(question, FixedExamples().select(question))
    stopped_out, full_out = llm.generate([stopped, dataclasses.replace(stopped, stop=())])
    assert stopped_out.ok and full_out.ok, (stopped_out.error, full_out.error)
    assert full_out.text.startswith("(james brown | ") and full_out.text.endswith(" | ?x)")
    assert draft.complete(stopped_out.text, completion_tokens=stopped_out.usage.completion_tokens) == full_out.text
    assert stopped_out.usage.completion_tokens <= full_out.usage.completion_tokens - 2


def test_concurrent_requests_all_complete_and_share_the_prefix(llm: LocalLLM) -> None:
    questions = ["where was alan turing born", "what is the capital of peru", "who directed the film alien",
                 "which country is porto in"]

    async def main() -> list:
        return await asyncio.gather(*(llm.agenerate([ask(q)]) for q in questions))

    results = [batch[0] for batch in asyncio.run(main())]
    assert all(r.ok for r in results), [r.error for r in results]
    assert all(TRIPLE_LINE.fullmatch(r.text) for r in results), [r.text for r in results]
    assert sum(r.usage.cached_prompt_tokens > 80 for r in results) >= 2  # the few-shot prefix is reused


def test_a_bad_request_fails_alone(llm: LocalLLM) -> None:
    bad, good = llm.generate([ask("q", grammar='root ::= ("unclosed'), ask("where was einstein born")])
    assert not bad.ok and "failed to parse grammar" in bad.error
    assert good.ok and TRIPLE_LINE.fullmatch(good.text)


def test_a_late_answer_becomes_a_timeout_error(llm: LocalLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm, "timeout_s", 0.05)
    short = ChatRequest(messages=(Message("user", "say hello"),), max_tokens=8)
    start = time.perf_counter()
    late = llm.generate([short, short])
    assert time.perf_counter() - start < 1.0
    assert all(not r.ok and "no answer within 0.05 s" in r.error for r in late)
    monkeypatch.setattr(llm, "timeout_s", 60.0)
    (done,) = llm.generate([ask("where was alan turing born")])  # waits for the late ones' slots
    assert done.ok, done.error


def test_a_cancelled_request_frees_its_slot_at_once() -> None:
    """A question timeout cancels the model call: llama.cpp stops it at its next token, so the one slot
    serves the next request now, not after the abandoned one's 3,000 tokens."""
    one_slot = LocalLLM(model=MODEL, cache_dir=Settings().cache_dir, parallel=1, context=4096)
    endless = ChatRequest(messages=(Message("user", "Count from 1 to 5000, one number per line."),),
                          max_tokens=3000)
    one_slot.load()

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(one_slot.agenerate([endless]), 3.0)  # as batch.question_timeout_s does
        (done,) = await asyncio.wait_for(one_slot.agenerate([ask("where was alan turing born")]), 60.0)
        assert done.ok and TRIPLE_LINE.fullmatch(done.text), done.error

    try:
        asyncio.run(main())
    finally:
        asyncio.run(one_slot.aclose())


class _Overlap:
    """The real llama.cpp server, counting how many chat completions it runs at once."""

    def __init__(self, server: object) -> None:
        self._server, self._lock, self.now, self.most = server, threading.Lock(), 0, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._server, name)

    def handle_chat_completions(self, *args: object) -> object:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            return self._server.handle_chat_completions(*args)  # type: ignore[attr-defined]
        finally:
            with self._lock:
                self.now -= 1


@pytest.mark.parametrize("decoding", [1, 2])
def test_decoding_bounds_the_requests_llama_cpp_runs_at_once(decoding: int) -> None:
    model = LocalLLM(model=MODEL, cache_dir=Settings().cache_dir, parallel=2, decoding=decoding, context=1024)
    model.load()
    overlap = _Overlap(model._server)
    model._server = overlap
    try:
        done = model.generate([ask(q) for q in ("where was alan turing born", "what is the capital of peru",
                                                "who directed the film alien", "which country is porto in")])
    finally:
        asyncio.run(model.aclose())
    assert all(d.ok for d in done), [d.error for d in done]
    assert overlap.most == decoding


class _Counting(LocalLLM):
    """Counts the requests it is sent."""

    sent = 0

    async def agenerate(self, requests):  # type: ignore[no-untyped-def]
        self.sent += len(requests)
        return await super().agenerate(requests)


def test_loading_ahead_decodes_nothing() -> None:
    """An LLM actor's warm-up loads the model without a request (a request costs its prompt's evaluation)."""
    model = _Counting(model=MODEL, cache_dir=Settings().cache_dir, parallel=1, context=1024)
    try:
        asyncio.run(model.aload())
        assert model._server is not None and model.sent == 0
    finally:
        asyncio.run(model.aclose())
