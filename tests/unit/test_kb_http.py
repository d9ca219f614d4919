"""The response hook that keeps cut and malformed SPARQL answers from passing for results."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from kif_lib import Store

from kifqa.kb.http import ResponseTooLarge, ResultError, check_response, check_results

URL = "https://sparql.example.org/sparql"
ROWS = b'{"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "literal", "value": "1"}}]}}'


def _check(status: int = 200, body: bytes = ROWS, headers: dict[str, str] | None = None) -> None:
    response = httpx.Response(status, headers=headers, content=body, request=httpx.Request("POST", URL))
    asyncio.run(check_response(response))


def _fetch(status: int, body: bytes) -> httpx.Response:
    """A request through a client with the hook installed, to a transport answering ``status`` and ``body``."""
    async def fetch() -> httpx.Response:
        transport = httpx.MockTransport(lambda request: httpx.Response(status, content=body))
        async with httpx.AsyncClient(transport=transport, event_hooks={"response": [check_response]}) as client:
            return await client.post(URL)
    return asyncio.run(fetch())


@pytest.mark.parametrize("body", [ROWS, b'{"head": {}, "boolean": true}'])
def test_complete_results_reach_the_caller_unchanged(body: bytes) -> None:
    response = _fetch(200, body)  # the hook read the body to check it: the caller still gets all of it
    assert response.status_code == 200 and response.content == body


def test_an_error_status_is_left_to_kif() -> None:
    response = _fetch(503, b"<html>down</html>")  # not a ResultError: KIF raises for the status itself
    assert response.content == b"<html>down</html>"
    with pytest.raises(httpx.HTTPStatusError, match="503"):
        response.raise_for_status()


@pytest.mark.parametrize(("headers", "body", "kind", "message"), [
    ({"X-SPARQL-MaxRows": "10000"}, ROWS, "truncated", "cut it at 10000 rows"),
    ({"X-SQL-State": "S1TAT", "X-SQL-Message": "RC...: Returning incomplete results"}, ROWS, "truncated",
     "partial answer"),
    ({}, ROWS[:40], "malformed", "not JSON"),
    ({}, b"<html>upstream hiccup</html>", "malformed", "not JSON"),
    ({}, b'{"results": {}}', "malformed", "not SPARQL results"),
    ({}, b"[]", "malformed", "not SPARQL results"),
    ({"Content-Type": "text/html"}, ROWS, "malformed", "content type 'text/html', not JSON"),
])
def test_cut_and_malformed_results_raise(headers, body, kind, message) -> None:
    with pytest.raises(ResultError, match=message) as info:
        _check(body=body, headers=headers)
    assert info.value.kind == kind and URL in str(info.value)


def test_only_httpx_sparql_stores_get_the_hook() -> None:
    store = Store("sparql-httpx", URL, headers={"User-Agent": "kifqa-test"})
    check_results([store, Store("empty")])
    client = store.backend._aclient
    assert client is not None and len(client.event_hooks["response"]) == 1
    assert client.headers["User-Agent"] == "kifqa-test"


def test_an_answer_past_the_byte_limit_stops_being_read() -> None:
    """Declared too long, it is not read; streamed past the limit (no length given), reading stops there."""
    sent = []

    def endless() -> Iterator[bytes]:
        yield b'{"head": {"vars": ["x"]}, "results": {"bindings": ['
        while True:
            sent.append(1)
            yield b'{"x": {"type": "literal", "value": "' + b"x" * 65_000 + b'"}},'

    async def fetch(response: httpx.Response) -> None:
        transport = httpx.MockTransport(lambda request: response)

        async def hook(answer: httpx.Response) -> None:
            await check_response(answer, max_bytes=1 << 20)

        async with httpx.AsyncClient(transport=transport, event_hooks={"response": [hook]}) as client:
            await client.post(URL)

    with pytest.raises(ResponseTooLarge, match=r"is 2,000,000 bytes, over kb.max_response_bytes \(1,048,576\)"):
        asyncio.run(fetch(httpx.Response(200, headers={"Content-Length": "2000000"}, content=b"")))
    with pytest.raises(ResponseTooLarge, match="passed kb.max_response_bytes"):
        asyncio.run(fetch(httpx.Response(200, content=AsyncChunks(endless()))))
    assert len(sent) < 20, "reading stopped near the limit"


class AsyncChunks(httpx.AsyncByteStream):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
