"""The ``openai`` backend: any server speaking OpenAI's chat-completions API, over async httpx.

Servers differ in how they take a grammar, so the server family is a setting:

* ``llamacpp`` (llama.cpp's ``llama-server``, xllamacpp, Ollama's OpenAI endpoint): ``"grammar"``;
* ``vllm`` (vLLM >= 0.10.2): ``"structured_outputs": {"grammar": ...}``;
* ``vllm-legacy`` (vLLM < 0.12, which still reads it): ``"guided_grammar"`` (vLLM >= 0.12 ignores
  this field silently, so use ``vllm`` there);
* ``openai`` (hosted APIs): no grammar; the caller's parser checks the text.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Literal

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from kifqa.errors import ConfigError
from kifqa.llm.aio import PerLoop
from kifqa.llm.base import LLM, ChatRequest, Completion
from kifqa.llm.wire import chat_body, error_message, parse_completion

ServerFamily = Literal["llamacpp", "vllm", "vllm-legacy", "openai"]

#: Answers worth retrying: rate limiting, timeouts and transient server failures.
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def grammar_fields(server: ServerFamily, grammar: str) -> dict[str, Any]:
    """The request fields that carry a GBNF ``grammar`` for a ``server`` family."""
    if server == "llamacpp":
        return {"grammar": grammar}
    if server == "vllm":
        return {"structured_outputs": {"grammar": grammar}}
    if server == "vllm-legacy":
        return {"guided_grammar": grammar}
    return {}


class _Retryable(Exception):
    """A failed attempt that a later one may fix."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        """``retry_after``: the server's ``Retry-After``, in seconds, if it sent one."""
        super().__init__(message)
        self.retry_after = retry_after


class OpenAILLM(LLM):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None = None,
        server: ServerFamily = "llamacpp",
        max_concurrency: int = 8,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        max_backoff_s: float = 30.0,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        """Configures a client; nothing is sent until the first request.

        Args:
            model: The served model's name (the request's ``model`` field).
            base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``.
            api_key: Sent as a bearer token when given.
            server: The server family, which decides how a grammar is sent (see the module doc).
            max_concurrency: Requests in flight at once, per event loop.
            timeout_s: Limit on one attempt (connect, send, wait, read), in seconds.
            max_retries: Further attempts after a timeout, a connection error or a 408/409/425/429/5xx.
            max_backoff_s: Longest pause between attempts (also caps a server's ``Retry-After``).
            body: Extra fields merged into every request body (e.g. ``{"top_k": 1}``).
        """
        if max_concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ConfigError("openai backend: max_concurrency >= 1, max_retries >= 0 and timeout_s > 0 are needed")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.server = server
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_backoff_s = max_backoff_s
        self.body = dict(body or {})
        self.identity = f"openai/{server}:{model}"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._backoff = wait_random_exponential(multiplier=0.5, max=max_backoff_s)
        self._limits: PerLoop[asyncio.Semaphore] = PerLoop(lambda: asyncio.Semaphore(max_concurrency))

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Completions for ``requests``, in order; failures after the retries become errors."""
        if not requests:
            return []
        limits = httpx.Limits(max_connections=self.max_concurrency)
        async with httpx.AsyncClient(
            base_url=self.base_url + "/", headers=self._headers, timeout=self.timeout_s, limits=limits
        ) as client:
            return list(await asyncio.gather(*(self._one(client, r) for r in requests)))

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``."""
        body = chat_body(request) | {"model": self.model}
        if request.grammar is not None:
            body |= grammar_fields(self.server, request.grammar)
        return body | self.body

    async def _one(self, client: httpx.AsyncClient, request: ChatRequest) -> Completion:
        """One request, retried as needed, as a completion (never raises)."""
        body = self.request_body(request)
        start = time.perf_counter()
        async with self._limits.get():
            try:
                async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(self.max_retries + 1),
                    wait=self._wait,
                    retry=retry_if_exception_type(_Retryable),
                    reraise=True,
                ):
                    with attempt:
                        data = await self._post(client, body)
            except _Retryable as e:
                return Completion(error=f"{self.base_url}: {e} (gave up after {self.max_retries + 1} attempts)")
        if isinstance(data, Completion):
            return data
        return parse_completion(data, latency_s=time.perf_counter() - start)

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> Any:
        """One attempt: the decoded JSON answer, an error :class:`Completion`, or :class:`_Retryable`."""
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await client.post("chat/completions", json=body)
        except (TimeoutError, httpx.TimeoutException) as e:
            raise _Retryable(f"no answer within {self.timeout_s:g} s") from e
        except httpx.TransportError as e:
            raise _Retryable(f"connection failed: {type(e).__name__}: {e}") from e
        except httpx.HTTPError as e:  # e.g. an undecodable body or a redirect loop: not transient
            return Completion(error=f"{self.base_url}: {type(e).__name__}: {e}")
        if response.status_code in RETRY_STATUSES:
            raise _Retryable(
                f"HTTP {response.status_code}: {_describe(response)}",
                retry_after=_retry_after(response.headers.get("retry-after")),
            )
        if response.status_code >= 400:
            return Completion(error=f"{self.base_url}: HTTP {response.status_code}: {_describe(response)}")
        try:
            return response.json()
        except ValueError:
            return Completion(error=f"{self.base_url}: invalid response: the body is not JSON: {response.text[:200]!r}")

    def _wait(self, retry_state: RetryCallState) -> float:
        """Seconds before the next attempt: the server's ``Retry-After`` if any, else jittered backoff."""
        error = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(error, _Retryable) and error.retry_after is not None:
            return min(error.retry_after, self.max_backoff_s)
        return self._backoff(retry_state)


def _describe(response: httpx.Response) -> str:
    """The error message in ``response`` (OpenAI's ``{"error": ...}``) or the start of its text."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    if isinstance(data, Mapping) and "error" in data:
        return error_message(data["error"])
    return str(data)[:200]


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delay in seconds or an HTTP date); ``None`` if absent/bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
