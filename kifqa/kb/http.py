"""Checks on the HTTP answers of KIF's SPARQL stores, which KIF itself takes on trust.

KIF's httpx backend parses whatever a 200 carries and hides the response headers, so an endpoint
that cuts a result at its row limit (Virtuoso's ``X-SPARQL-MaxRows``, or its partial "anytime"
answers, ``X-SQL-State: S1TAT``) would pass for a complete answer, and a truncated or non-JSON body
would fail deep inside KIF. :func:`check_results` gives each SPARQL store an async client whose
response hook raises :class:`ResultError` first; :class:`~kifqa.kb.guard.Guard` retries it by kind
and finally reports it, so such a result is never taken as complete. The hook also reads the body as
it streams in, at most ``kb.max_response_bytes`` of it counted decoded (:func:`kifqa.bounded.bound_body`;
:class:`ResponseTooLarge`, not retried), and refuses a 200 whose content type is not JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import httpx
from kif_lib import Search, Store
from kif_lib.search.httpx import HttpxSearch
from kif_lib.store.sparql.httpx import HttpxSPARQL_Store

from kifqa.bounded import ACCEPT_ENCODING, ResponseTooLarge, bound_body
from kifqa.redact import redact

__all__ = ["ResponseTooLarge", "ResultError", "bound_searches", "check_response", "check_results"]


class ResultError(Exception):
    """A 200 answer that is not a complete SPARQL result."""

    def __init__(self, kind: Literal["truncated", "malformed"], message: str) -> None:
        super().__init__(message)
        self.kind: Literal["truncated", "malformed"] = kind


async def check_response(response: httpx.Response, *, max_bytes: int = 64 * 2**20) -> None:
    """Bounds the body of every answer to ``max_bytes`` (:func:`_bound`); raises :class:`ResultError`
    for a 200 whose result is cut short, whose content type is not JSON or that is not SPARQL JSON results."""
    _bound(response, max_bytes)
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


def bound_searches(searches: Iterable[Search | None], *, max_bytes: int) -> None:
    """Makes KIF's httpx searches (the Wikidata and DBpedia APIs) read their answers up to ``max_bytes``
    decoded bytes (:func:`_bound`): a client already given to one (:mod:`kifqa.kb.services`) gets the bound
    as its first response hook, before any hook reads the body; one that has none gets a client like KIF's
    own, plus the bound."""

    async def hook(response: httpx.Response) -> None:
        _bound(response, max_bytes)

    for search in searches:
        if not isinstance(search, HttpxSearch):
            continue
        if search._aclient is None:
            # KIF builds this client lazily with only its headers; we build it the same way, plus the hook.
            search._aclient = httpx.AsyncClient(headers=_headers(search._headers), event_hooks={"response": [hook]})
            continue
        client = search._aclient
        hooks = client.event_hooks
        client.event_hooks = {**hooks, "response": [hook, *hooks["response"]]}
        client.headers = _headers(client.headers)


def check_results(stores: Iterable[Store], *, max_bytes: int = 64 * 2**20) -> None:
    """Gives the httpx SPARQL stores among ``stores`` an async client that runs :func:`check_response`
    (answers of at most ``max_bytes``)."""

    async def hook(response: httpx.Response) -> None:
        await check_response(response, max_bytes=max_bytes)

    for store in stores:
        backend = getattr(store, "backend", None) if isinstance(store, HttpxSPARQL_Store) else None
        if isinstance(backend, HttpxSPARQL_Store.HttpxBackend) and backend._aclient is None:
            # KIF builds this client lazily with only its headers; we build it the same way, plus the hook.
            backend._aclient = httpx.AsyncClient(headers=_headers(backend._headers),
                                                 event_hooks={"response": [hook]})


def _bound(response: httpx.Response, max_bytes: int) -> None:
    """Bounds ``response``'s body to ``max_bytes`` decoded bytes, under ``kb.max_response_bytes``'s name."""
    bound_body(response, max_bytes, setting="kb.max_response_bytes",
               source=f"the answer from {redact(str(response.request.url))}")


def _headers(headers: Mapping[str, str] | None) -> httpx.Headers:
    """KIF's headers for a client, asking only for the encodings :func:`_bound` decodes."""
    merged = httpx.Headers(headers)
    merged["Accept-Encoding"] = ACCEPT_ENCODING
    return merged
