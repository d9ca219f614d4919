"""The response hook that keeps cut and malformed SPARQL answers from passing for results."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from kif_lib import Store

from kifqa.kb.http import ResultError, check_response, check_results

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
])
def test_cut_and_malformed_results_raise(headers, body, kind, message) -> None:
    with pytest.raises(ResultError, match=message) as info:
        _check(body=body, headers=headers)
    assert info.value.kind == kind and URL in str(info.value)


def test_only_httpx_sparql_stores_get_the_hook() -> None:
    store = Store("sparql-httpx", URL, headers={"User-Agent": "kifqa-test"})
    check_results([store, Store("empty")])
    client = store.backend._aclient
    assert client is not None and client.event_hooks["response"] == [check_response]
    assert client.headers["User-Agent"] == "kifqa-test"
