"""Checks on the HTTP answers of KIF's SPARQL stores, which KIF itself takes on trust.

KIF's httpx backend parses whatever a 200 carries and hides the response headers, so an endpoint
that cuts a result at its row limit (Virtuoso's ``X-SPARQL-MaxRows``, or its partial "anytime"
answers, ``X-SQL-State: S1TAT``) would pass for a complete answer, and a truncated or non-JSON body
would fail deep inside KIF. :func:`check_results` gives each SPARQL store an async client whose
response hook raises :class:`ResultError` first; :class:`~kifqa.kb.guard.Guard` retries it by kind
and finally reports it, so such a result is never taken as complete. The hook also reads the body as
it streams in, at most ``kb.max_response_bytes`` of it (:class:`ResponseTooLarge`, not retried), and
refuses a 200 whose content type is not JSON.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any, Literal

import httpx
from kif_lib import Search, Store
from kif_lib.search.httpx import HttpxSearch
from kif_lib.store.sparql.httpx import HttpxSPARQL_Store

from kifqa.redact import redact


class ResultError(Exception):
    """A 200 answer that is not a complete SPARQL result."""

    def __init__(self, kind: Literal["truncated", "malformed"], message: str) -> None:
        super().__init__(message)
        self.kind: Literal["truncated", "malformed"] = kind


class ResponseTooLarge(Exception):
    """An answer longer than ``kb.max_response_bytes``: reading stopped there (retrying would read it again)."""


class _Bounded(httpx.AsyncByteStream):
    """A response body that raises :class:`ResponseTooLarge` once more than ``limit`` bytes came in."""

    def __init__(self, stream: httpx.AsyncByteStream, limit: int, url: str) -> None:
        self._stream, self._limit, self._url = stream, limit, url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._stream:
            size += len(chunk)
            if size > self._limit:
                raise ResponseTooLarge(f"the answer from {self._url} passed kb.max_response_bytes ({self._limit:,} "
                                       "bytes); reading stopped there")
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


def bound_body(response: httpx.Response, max_bytes: int) -> None:
    """Makes reading ``response``'s body raise :class:`ResponseTooLarge` past ``max_bytes`` (at once if its
    ``Content-Length`` says it will pass them)."""
    url = redact(str(response.request.url))
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ResponseTooLarge(f"the answer from {url} is {int(declared):,} bytes, over kb.max_response_bytes "
                               f"({max_bytes:,}); not read")
    if isinstance(response.stream, httpx.AsyncByteStream):
        response.stream = _Bounded(response.stream, max_bytes, url)


async def check_response(response: httpx.Response, *, max_bytes: int = 64 * 2**20) -> None:
    """Bounds the body of every answer to ``max_bytes`` (:func:`bound_body`); raises :class:`ResultError`
    for a 200 whose result is cut short, whose content type is not JSON or that is not SPARQL JSON results."""
    bound_body(response, max_bytes)
    url = redact(str(response.request.url))
    if response.status_code != 200:
        return  # KIF raises for the status
    kind = response.headers.get("content-type", "")
    if kind and "json" not in kind.lower():
        raise ResultError("malformed", f"malformed result from {url}: content type {kind[:80]!r}, not JSON")
    if rows := response.headers.get("X-SPARQL-MaxRows"):
        raise ResultError("truncated", f"truncated result from {url}: the endpoint cut it at {rows} rows "
                                       "(X-SPARQL-MaxRows)")
    if response.headers.get("X-SQL-State") == "S1TAT":
        raise ResultError("truncated", f"truncated result from {url}: partial answer "
                                       f"({response.headers.get('X-SQL-Message', 'query interrupted')})")
    await response.aread()
    try:
        data = json.loads(response.content)
    except ValueError as err:
        start = response.content[:80].decode("utf-8", "replace")
        raise ResultError("malformed", f"malformed result from {url}: not JSON ({err}): {start!r}") from None
    if not _is_results(data):
        raise ResultError("malformed", f"malformed result from {url}: JSON but not SPARQL results")


def _is_results(data: Any) -> bool:
    """Whether ``data`` has the shape of SPARQL 1.1 JSON results (SELECT bindings or an ASK boolean)."""
    if not isinstance(data, dict):
        return False
    if isinstance(data.get("boolean"), bool):
        return True
    results = data.get("results")
    return isinstance(results, dict) and isinstance(results.get("bindings"), list)


def bound_searches(searches: Iterable[Search], *, max_bytes: int) -> None:
    """Gives KIF's httpx searches (the Wikidata and DBpedia APIs) an async client whose answers are read
    up to ``max_bytes`` (:func:`bound_body`)."""

    async def hook(response: httpx.Response) -> None:
        bound_body(response, max_bytes)

    for search in searches:
        if isinstance(search, HttpxSearch) and search._aclient is None:
            # KIF builds this client lazily with only its headers; we build it the same way, plus the hook.
            search._aclient = httpx.AsyncClient(headers=search._headers, event_hooks={"response": [hook]})


def check_results(stores: Iterable[Store], *, max_bytes: int = 64 * 2**20) -> None:
    """Gives the httpx SPARQL stores among ``stores`` an async client that runs :func:`check_response`
    (answers of at most ``max_bytes``)."""

    async def hook(response: httpx.Response) -> None:
        await check_response(response, max_bytes=max_bytes)

    for store in stores:
        backend = getattr(store, "backend", None) if isinstance(store, HttpxSPARQL_Store) else None
        if isinstance(backend, HttpxSPARQL_Store.HttpxBackend) and backend._aclient is None:
            # KIF builds this client lazily with only its headers; we build it the same way, plus the hook.
            backend._aclient = httpx.AsyncClient(headers=backend._headers, event_hooks={"response": [hook]})
