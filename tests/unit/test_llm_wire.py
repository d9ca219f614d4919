"""Reading chat-completions answers as llama.cpp, vLLM and OpenAI write them."""

from __future__ import annotations

from kifqa.llm.wire import chat_body, join_stream, parse_completion


def answer(**extra: object) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "(a | b | ?x)"}}]} | extra


def test_llama_cpp_usage_and_timings() -> None:
    done = parse_completion(answer(
        usage={"prompt_tokens": 422, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 413}},
        timings={"cache_n": 413, "prompt_n": 9, "prompt_ms": 250.0, "predicted_n": 9, "predicted_ms": 450.0},
    ), latency_s=0.8)
    assert done.text == "(a | b | ?x)"
    u = done.usage
    assert (u.prompt_tokens, u.completion_tokens, u.cached_prompt_tokens) == (422, 9, 413)
    assert (u.prompt_s, u.generation_s, u.latency_s) == (0.25, 0.45, 0.8)


def test_cache_hits_from_timings_when_usage_lacks_them() -> None:
    done = parse_completion(answer(usage={"prompt_tokens": 50, "completion_tokens": 3}, timings={"cache_n": 40}),
                            latency_s=0.1)
    assert done.usage.cached_prompt_tokens == 40


def test_plain_openai_usage() -> None:
    done = parse_completion(answer(usage={"prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53}),
                            latency_s=0.1)
    assert (done.usage.prompt_tokens, done.usage.cached_prompt_tokens, done.usage.prompt_s) == (50, 0, 0.0)


def test_missing_usage_is_zero_not_an_error() -> None:
    done = parse_completion(answer(), latency_s=0.1)
    assert done.ok and done.usage.prompt_tokens == 0


def test_errors_and_malformed_answers() -> None:
    error = parse_completion({"error": {"message": "boom", "code": 400}}, latency_s=0).error
    assert error == "server error: boom (code 400)"
    assert parse_completion({"error": "plain"}, latency_s=0).error == "server error: plain"
    assert "no choices" in parse_completion({"choices": None}, latency_s=0).error
    assert "no message content" in parse_completion({"choices": [{"message": {"content": None}}]}, latency_s=0).error
    assert "expected a JSON object" in parse_completion("text", latency_s=0).error


def test_a_stream_joins_into_the_unstreamed_answer() -> None:
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
              {"choices": [{"index": 0, "delta": {"content": "(james"}}]},
              {"choices": [{"index": 0, "delta": {"content": " brown | born in | ?x)"}}]},
              {"choices": [{"index": 0, "finish_reason": "stop", "delta": {}}]},
              {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 9,
                                        "prompt_tokens_details": {"cached_tokens": 30}},
               "timings": {"prompt_ms": 120.0, "predicted_ms": 300.0}}]
    done = parse_completion(join_stream(chunks), latency_s=0.5)
    assert done.ok and done.text == "(james brown | born in | ?x)"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.cached_prompt_tokens) == (40, 9, 30)
    assert (done.usage.prompt_s, done.usage.generation_s) == (0.12, 0.3)


def test_a_refused_stream_is_its_error() -> None:
    refused = [{"error": {"code": 400, "message": "failed to parse grammar", "type": "invalid_request_error"}}]
    done = parse_completion(join_stream(refused), latency_s=0.0)
    assert not done.ok and done.error == "server error: failed to parse grammar (code 400)"
    assert parse_completion(join_stream([]), latency_s=0.0).error == "invalid response: no choices"


def test_the_body_asks_for_token_logprobs() -> None:
    from kifqa.llm.base import ChatRequest, Message

    assert chat_body(ChatRequest(messages=(Message("user", "hi"),)))["logprobs"] is True


def test_token_logprobs_of_an_answer() -> None:
    content = [{"token": "(a", "logprob": -0.25, "top_logprobs": []}, {"token": " |", "logprob": 0}]
    done = parse_completion({"choices": [{"message": {"content": "(a |"}, "logprobs": {"content": content}}]},
                            latency_s=0)
    assert done.logprobs == (-0.25, 0.0)
    assert parse_completion(answer(), latency_s=0).logprobs == ()


def test_token_logprobs_that_are_not_all_numbers_are_none() -> None:
    for bad in ([{"logprob": -0.1}, {"logprob": None}], [{"logprob": "x"}], [{"logprob": float("nan")}], [3]):
        done = parse_completion({"choices": [{"message": {"content": "a"}, "logprobs": {"content": bad}}]},
                                latency_s=0)
        assert done.ok and done.logprobs == ()


def test_a_stream_joins_its_token_logprobs_in_order() -> None:
    def token(text: str, logprob: float) -> dict:
        return {"choices": [{"index": 0, "delta": {"content": text},
                             "logprobs": {"content": [{"token": text, "logprob": logprob}]}}]}

    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
              token("(a", -0.5), token(" |", -0.01), token(" b", -2.0),
              {"choices": [{"index": 0, "finish_reason": "stop", "delta": {}}]},
              {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}}]
    done = parse_completion(join_stream(chunks), latency_s=0)
    assert done.text == "(a | b" and done.logprobs == (-0.5, -0.01, -2.0)
