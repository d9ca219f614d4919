"""The recorder's trace of a model call: its cost, output and the model's own token probabilities."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kifqa.llm import LLM, ChatRequest, Completion, Message, Usage
from kifqa.pipeline.recorder import Recorder
from kifqa.types import Trace


class Fixed(LLM):
    """Answers every request with one completion."""

    identity = "fixed"

    def __init__(self, completion: Completion) -> None:
        self.completion = completion

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        return [self.completion for _ in requests]


REQUEST = ChatRequest(messages=(Message("user", "Number:"),))


def test_a_call_s_token_logprobs_are_summed_and_their_least_kept() -> None:
    trace = Trace("q1", "who wrote dracula")
    recorder = Recorder(trace)
    completion = Completion(text="2", usage=Usage(completion_tokens=2), logprobs=(-0.5, -1.5))
    with recorder.step("relations"):
        asyncio.run(recorder.generate(Fixed(completion), REQUEST))
    [call] = trace.llm_calls
    assert (call.step, call.logprob, call.min_logprob, call.mean_logprob) == ("relations", -2.0, -1.5, -1.0)
    again = Trace.from_dict(trace.to_dict())
    assert again.llm_calls == [call]


def test_a_call_without_logprobs_records_none() -> None:
    trace = Trace("q1", "who wrote dracula")
    asyncio.run(Recorder(trace).generate(Fixed(Completion(text="1")), REQUEST))
    [call] = trace.llm_calls
    assert (call.logprob, call.min_logprob, call.mean_logprob) == (None, None, None)
