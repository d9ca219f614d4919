"""The OpenAI chat-completions wire format: request bodies out, completions in.

Shared by the backends that speak it (llama.cpp in-process, any OpenAI-compatible server).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kifqa.llm.base import ChatRequest, Completion, Usage


def chat_body(request: ChatRequest) -> dict[str, Any]:
    """The portable part of a chat-completions body for ``request`` (no model, no grammar), asking for each
    sampled token's log probability (``logprobs``)."""
    body: dict[str, Any] = {
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "logprobs": True,
    }
    if request.stop:
        body["stop"] = list(request.stop)
    return body


def parse_completion(data: Any, *, latency_s: float) -> Completion:
    """A :class:`Completion` from a decoded chat-completions response, errors included.

    An ``error`` object, a missing or empty ``choices`` list or a non-string message content
    becomes the completion's ``error``; nothing here raises. The first choice's
    ``logprobs.content[*].logprob`` become the completion's ``logprobs`` (none where any is missing or not a
    finite number).
    """
    if not isinstance(data, Mapping):
        return Completion(error=f"invalid response: expected a JSON object, got {type(data).__name__}")
    if "error" in data:
        return Completion(error=f"server error: {error_message(data['error'])}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return Completion(error="invalid response: no choices")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, str):
        return Completion(error="invalid response: the first choice has no message content")
    return Completion(text=content, usage=parse_usage(data, latency_s=latency_s),
                      logprobs=token_logprobs(_logprob_entries(choices[0])))


def join_stream(chunks: list[Any]) -> Any:
    """A streamed answer (``chat.completion.chunk`` objects, or the one error object a refused request
    gives) as the response the same request would have had without streaming, for :func:`parse_completion`."""
    if len(chunks) == 1 and isinstance(chunks[0], Mapping) and "error" in chunks[0]:
        return chunks[0]
    text: list[str] = []
    logprobs: list[Any] = []
    joined: dict[str, Any] = {}
    for chunk in chunks:
        if not isinstance(chunk, Mapping):
            return chunk
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") if isinstance(choice, Mapping) else None
            if isinstance(delta, Mapping) and isinstance(delta.get("content"), str):
                text.append(delta["content"])
            logprobs.extend(_logprob_entries(choice))
        joined.update({k: chunk[k] for k in ("usage", "timings", "error") if k in chunk})
    if not chunks:
        return {}
    message = {"role": "assistant", "content": "".join(text)}
    return {**joined, "choices": [{"message": message, "logprobs": {"content": logprobs}}]}


def token_logprobs(entries: list[Any]) -> tuple[float, ...]:
    """The ``logprob`` of each of ``entries`` (``logprobs.content`` items), or none at all when one lacks a
    finite number: a partial list would misstate the output's probability."""
    values: list[float] = []
    for entry in entries:
        value = entry.get("logprob") if isinstance(entry, Mapping) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return ()
        values.append(float(value))
    return tuple(values)


def _logprob_entries(choice: Any) -> list[Any]:
    """A choice's (or a streamed chunk's choice's) ``logprobs.content`` list; empty where it has none."""
    logprobs = choice.get("logprobs") if isinstance(choice, Mapping) else None
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    return content if isinstance(content, list) else []


def parse_usage(data: Mapping[str, Any], *, latency_s: float) -> Usage:
    """Token counts from ``usage``, and from llama.cpp's ``timings`` the prompt and generation
    times (and the prefix-cache hits when ``usage`` lacks them)."""
    usage = data.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    timings = data.get("timings")
    timings = timings if isinstance(timings, Mapping) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Usage(
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_prompt_tokens=_int(cached if cached is not None else timings.get("cache_n")),
        latency_s=latency_s,
        prompt_s=_ms(timings.get("prompt_ms")),
        generation_s=_ms(timings.get("predicted_ms")),
    )


def error_message(error: Any) -> str:
    """The human part of an OpenAI-style ``error`` value (an object with ``message``, or a string)."""
    if isinstance(error, Mapping):
        message = error.get("message")
        code = error.get("code")
        text = str(message) if message is not None else str(dict(error))
        return f"{text} (code {code})" if code is not None else text
    return str(error)


def _int(value: Any) -> int:
    """``value`` if it is an int, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _ms(value: Any) -> float:
    """Milliseconds as seconds; 0 when absent."""
    return value / 1000 if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
