"""The ``openai`` backend: any server speaking OpenAI's chat-completions API, over async httpx.

Servers differ in how they take a grammar, so the server family is a setting:

* ``llamacpp`` (llama.cpp's ``llama-server``, xllamacpp, Ollama's OpenAI endpoint): ``"grammar"``;
* ``vllm`` (vLLM >= 0.11): ``"structured_outputs": {"grammar": ...}``;
* ``vllm-legacy`` (vLLM < 0.12, which still reads it): ``"guided_grammar"`` (vLLM >= 0.12 ignores
  this field silently, so use ``vllm`` there);
* ``openai`` (hosted APIs): no grammar; the caller's parser checks the text.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import httpx

from kifqa.bounded import ACCEPT_ENCODING, ResponseTooLarge, bound_body
from kifqa.config import LLMResilience, Resilience
from kifqa.errors import ConfigError
from kifqa.llm.aio import PerLoop
from kifqa.llm.base import LLM, ChatRequest, Completion
from kifqa.llm.wire import chat_body, error_message, parse_completion
from kifqa.redact import redact
from kifqa.resilience import Endpoint, Failure, GaveUp, RetryPolicy, http_failure, retry_after_seconds, status_failure

ServerFamily = Literal["llamacpp", "vllm", "vllm-legacy", "openai"]


def grammar_fields(server: ServerFamily, grammar: str) -> dict[str, Any]:
    """The request fields that carry a GBNF ``grammar`` for a ``server`` family."""
    if server == "llamacpp":
        return {"grammar": grammar}
    if server == "vllm":
        return {"structured_outputs": {"grammar": grammar}}
    if server == "vllm-legacy":
        return {"guided_grammar": grammar}
    return {}


class _Failed(Exception):
    """A failed attempt that a later one may fix."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


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
        resilience: Resilience | None = None,
        body: Mapping[str, Any] | None = None,
        max_response_bytes: int = 8 * 2**20,
    ) -> None:
        """Configures a client; nothing is sent until the first request.

        Args:
            model: The served model's name (the request's ``model`` field).
            base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``.
            api_key: Sent as a bearer token when given.
            server: The server family, which decides how a grammar is sent (see the module doc).
            max_concurrency: Requests in flight at once, per event loop.
            timeout_s: Limit on one attempt (connect, send, wait, read), in seconds.
            resilience: Retries (after a timeout, a connection error, a 408/409/425/429/5xx or a 200
                whose body is not JSON), backoff (``max_backoff_s`` also caps a server's ``Retry-After``)
                and circuit breaker; :class:`~kifqa.config.LLMResilience`'s defaults when ``None``.
            body: Extra fields merged into every request body (e.g. ``{"top_k": 1}``).
            max_response_bytes: Bytes of one answer read at most (decompressed): past them reading stops and
                the request fails, unretried (a hostile or broken server cannot fill the memory).
        """
        resilience = resilience or LLMResilience()
        if max_concurrency < 1 or resilience.retries < 0 or timeout_s <= 0:
            raise ConfigError("openai backend: max_concurrency >= 1, retries >= 0 and timeout_s > 0 are needed")
        self.model = model
        self.base_url = base_url.rstrip("/")
        #: The base URL as messages name it (its credentials masked).
        self.name = redact(self.base_url)
        self.server = server
        self.max_concurrency = max_concurrency
        self.timeout_s = timeout_s
        self.body = dict(body or {})
        self.max_response_bytes = max_response_bytes
        self.identity = f"openai/{server}:{model}"
        self.endpoint = Endpoint(self.name, RetryPolicy(
            truncated_retries=0, timeout_s=timeout_s, max_retry_after_s=resilience.max_backoff_s,
            **resilience.model_dump()))
        self._headers = {"Accept-Encoding": ACCEPT_ENCODING}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._limits: PerLoop[asyncio.Semaphore] = PerLoop(lambda: asyncio.Semaphore(max_concurrency))
        self._clients: PerLoop[httpx.AsyncClient] = PerLoop(self._client)

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Completions for ``requests``, in order; failures after the retries become errors."""
        if not requests:
            return []
        client = self._clients.get()
        return list(await asyncio.gather(*(self._one(client, r) for r in requests)))

    async def aclose(self) -> None:
        """Closes this event loop's HTTP client (its pooled connections)."""
        if (client := self._clients.pop()) is not None:
            await client.aclose()

    def _client(self) -> httpx.AsyncClient:
        """An HTTP client for this event loop: its connections are kept and reused between requests
        (a new client per call costs a TLS context and a connection per request)."""
        return httpx.AsyncClient(base_url=self.base_url + "/", headers=self._headers, timeout=self.timeout_s,
                                 limits=httpx.Limits(max_connections=self.max_concurrency))

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
        try:
            data = await self.endpoint.run(lambda: self._post(client, body), self._classify, slot=self._limits.get)
        except GaveUp as e:
            tries = f" (gave up after {e.attempts} attempts)" if e.attempts else ""
            return Completion(error=redact(f"{self.name}: {e}{tries}"))
        if isinstance(data, Completion):
            return data
        return parse_completion(data, latency_s=time.perf_counter() - start)

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> Any:
        """One attempt: the decoded JSON answer or an error :class:`Completion`; raises what a retry may fix.
        The answer is read as it streams in, at most :attr:`max_response_bytes` of it."""
        try:
            async with client.stream("POST", "chat/completions", json=body) as response:
                content = await _read_within(response, self.max_response_bytes)
        except httpx.TransportError:  # timeouts and connection failures: retried (see _classify)
            raise
        except httpx.HTTPError as e:  # e.g. an undecodable body or a redirect loop: not transient
            return Completion(error=redact(f"{self.name}: {type(e).__name__}: {e}"))
        except ResponseTooLarge as e:
            return Completion(error=f"{self.name}: {e}")
        if kind := status_failure(response.status_code):
            raise _Failed(Failure(kind, f"HTTP {response.status_code}: {_describe(response, content)}",
                                  retry_after=retry_after_seconds(response.headers.get("retry-after"))))
        if response.status_code >= 400:
            return Completion(error=redact(f"{self.name}: HTTP {response.status_code}: {_describe(response, content)}"))
        kind_of_content = response.headers.get("content-type", "")
        if kind_of_content and "json" not in kind_of_content.lower():  # a proxy's page, a captive portal: try again
            raise _Failed(Failure("malformed", f"invalid response: content type {kind_of_content[:80]!r}, not JSON: "
                                               f"{_start(content)!r}"))
        try:
            return json.loads(content)
        except ValueError as err:  # a cut or garbled body (a proxy's error page, a dropped stream): try again
            raise _Failed(Failure("malformed", f"invalid response: the body is not JSON: {_start(content)!r}")) from err

    def _classify(self, error: BaseException) -> Failure | None:
        """What a failed attempt was, for the retry policy."""
        if isinstance(error, _Failed):
            return error.failure
        return http_failure(error, timed_out=f"no answer within {self.timeout_s:g} s")


async def _read_within(response: httpx.Response, limit: int) -> bytes:
    """The body of ``response``, read as it streams in up to ``limit`` decoded bytes
    (:func:`~kifqa.bounded.bound_body`), the rest left unread."""
    bound_body(response, limit, setting="llm.max_response_bytes")
    return await response.aread()


def _start(content: bytes) -> str:
    """The start of a body, as text."""
    return content[:200].decode("utf-8", "replace")


def _describe(response: httpx.Response, content: bytes) -> str:
    """The error message in an answer (OpenAI's ``{"error": ...}``) or the start of its text."""
    try:
        data = json.loads(content)
    except ValueError:
        return _start(content) or response.reason_phrase
    if isinstance(data, Mapping) and "error" in data:
        return error_message(data["error"])
    return str(data)[:200]
