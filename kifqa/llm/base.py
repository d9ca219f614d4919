"""The model interface the pipeline talks to: a batch of chat requests in, completions out."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from kifqa.llm.blockstate import BlockStats

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion request.

    ``grammar`` (GBNF, as llama.cpp reads it) constrains the output where the backend can; backends
    that cannot constrain decode freely and the caller's parser still checks the text.
    """

    messages: tuple[Message, ...]
    grammar: str | None = None
    max_tokens: int = 128
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    #: Names the prompt prefix this request shares with others (its few-shot block): a scheduling
    #: hint that sends such requests to the same model instance, whose prefix cache then serves
    #: the prefix. Not part of the request's content (nor of the record cache's key).
    prefix_key: str | None = None
    #: How many leading messages that prefix is (None: all but the last). The local backend keeps
    #: their KV state on disk and restores it instead of evaluating them.
    prefix_messages: int | None = None


@dataclass(frozen=True)
class Usage:
    """What one request cost."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Prompt tokens served from the backend's prefix cache (not recomputed).
    cached_prompt_tokens: int = 0
    latency_s: float = 0.0
    #: True when the answer came from the record/replay cache (no model time spent).
    cache_hit: bool = False
    #: Seconds spent evaluating the (uncached) prompt, when the backend reports it.
    prompt_s: float = 0.0
    #: Seconds spent generating, when the backend reports it.
    generation_s: float = 0.0
    #: On a record/replay cache hit: what the request cost when it was recorded (prefix-cache
    #: tokens and times), where the cache holds it; the fields above stay those of the replay.
    recorded: Usage | None = None


@dataclass(frozen=True)
class Completion:
    """A request's output text, or the error that stopped it (never both meaningful)."""

    text: str = ""
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    #: The natural log of the probability the model gave each token of ``text`` it sampled, in order (empty
    #: where the backend reports none): the model's own confidence in its output.
    logprobs: tuple[float, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None


#: The request :meth:`LLM.aload` sends by default.
_LOAD = ChatRequest(messages=(Message("user", "Hi"),), max_tokens=1)


class LLM(abc.ABC):
    """A chat model. ``agenerate`` never raises for one bad request: that request's ``error`` says why."""

    #: Identifies the model and decoding setup (part of the record/replay cache key).
    identity: str

    @abc.abstractmethod
    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Completions for ``requests``, in order."""

    async def aload(self) -> None:
        """Loads the model now (backends load on first use), so that a first question does not wait for it;
        by default a one-token request, which also checks that the model answers."""
        await self.agenerate([_LOAD])

    def blocks(self) -> BlockStats | None:
        """What restoring and computing saved few-shot block states cost so far (None: this backend
        keeps none, see :mod:`kifqa.llm.blockstate`)."""
        return None

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Sync form of :meth:`agenerate` (not from inside a running event loop)."""
        return asyncio.run(self.agenerate(requests))

    async def aclose(self) -> None:
        """Releases the model and its connections."""
