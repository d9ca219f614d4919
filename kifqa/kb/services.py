"""What KIF's public search plugins take on trust, checked: the Wikidata API (``wikidata-wapi``) and DBpedia
Lookup (``dbpedia-lookup``).

KIF reads a ``wbsearchentities`` answer as ``answer.get("search", [])`` and a Lookup answer's ``docs`` if
there are any, so an error, a throttled answer or a changed format reads as "no candidates". Each search gets
an async client (built as KIF builds it, with its headers) whose response hook raises first:

- the Wikidata API's ``maxlag`` refusal (HTTP 200, ``MediaWiki-API-Error: maxlag``) becomes
  :class:`MaxlagError`, which :class:`~kifqa.kb.guard.Guard` waits out like a 429, at least its ``Retry-After``;
- any other API error, a missing ``search``/``query.search``/``docs`` list, or a hit without a field KIF reads (or
  with one of another type) becomes :class:`SearchAnswerError`, an error of that call only (retrying cannot help),
  which the knowledge base counts as no hit (:class:`~kifqa.kb.fallible.Fallible`). Fields kifqa does not know
  are accepted: Wikidata adds some from time to time;
- every Wikidata API request carries ``maxlag`` (``kb.maxlag_s``), as Wikimedia asks of automated clients.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from kif_lib import Search

from kifqa.errors import KBError
from kifqa.resilience import retry_after_seconds

#: The fields of a ``wbsearchentities`` hit that KIF reads, and their type: ``id`` and ``concepturi`` always, the
#: others where present (a property's ``datatype``, the ``match`` KIF takes a label or an alias from).
WBSEARCH_HIT_TYPES: dict[str, type] = {"id": str, "concepturi": str, "label": str, "description": str,
                                       "datatype": str, "match": dict}
#: Seconds a ``maxlag`` refusal waits when it carries no ``Retry-After`` (MediaWiki sends 5).
DEFAULT_MAXLAG_WAIT_S = 5.0


class MaxlagError(httpx.HTTPStatusError):
    """The Wikidata API refused a request: its replication lag is above the request's ``maxlag``."""

    def __init__(self, message: str, *, response: httpx.Response, retry_after_s: float) -> None:
        super().__init__(message, request=response.request, response=response)
        #: How long to send nothing (the answer's ``Retry-After``, else :data:`DEFAULT_MAXLAG_WAIT_S`).
        self.retry_after_s = retry_after_s


class SearchAnswerError(KBError):
    """A search service's answer that is not what its plugin reads: an error, or a changed format."""


def check_wikidata_api(search: Search, *, maxlag_s: int | None) -> None:
    """Gives KIF's ``wikidata-wapi`` search a client that sends ``maxlag`` and runs :func:`check_wbsearch`."""
    params = {"maxlag": str(maxlag_s)} if maxlag_s is not None else {}
    _give_client(search, params, check_wbsearch)


def check_dbpedia_lookup(search: Search) -> None:
    """Gives KIF's ``dbpedia-lookup`` search a client that runs :func:`check_lookup`."""
    _give_client(search, {}, check_lookup)


def _give_client(search: Search, params: dict[str, str], hook: Any) -> None:
    # KIF builds this client lazily with only its headers; we build it the same way, plus params and the hook.
    headers = getattr(search, "_headers", {})
    search._aclient = httpx.AsyncClient(headers=headers, params=params,  # type: ignore[attr-defined]
                                        event_hooks={"response": [hook]})


async def check_wbsearch(response: httpx.Response) -> None:
    """Raises :class:`MaxlagError` or :class:`SearchAnswerError` for a 200 of the Wikidata API that is not a
    ``wbsearchentities`` result in the shape KIF reads."""
    if response.status_code != 200:
        return  # KIF raises for the status
    data = await _json(response, "the Wikidata API")
    error = data.get("error") if isinstance(data, dict) else None
    if response.headers.get("MediaWiki-API-Error") == "maxlag" or (isinstance(error, dict)
                                                                   and error.get("code") == "maxlag"):
        asked = retry_after_seconds(response.headers.get("Retry-After"))
        wait = asked if asked is not None else DEFAULT_MAXLAG_WAIT_S
        lag = error.get("lag", "?") if isinstance(error, dict) else response.headers.get("X-Database-Lag", "?")
        maxlag = response.request.url.params.get("maxlag")
        raise MaxlagError(f"the Wikidata API is lagged {lag} s, above maxlag {maxlag}: waiting {wait:g} s",
                          response=response, retry_after_s=wait)
    action = response.request.url.params.get("action")
    if action == "query":
        _check_fulltext(data, error, f"full-text search answer from {response.request.url.host}")
    if action != "wbsearchentities":
        return
    where = f"wbsearchentities answer from {response.request.url.host}"
    if error is not None:
        raise SearchAnswerError(f"{where}: API error {json.dumps(error)[:300]}")
    if not isinstance(data, dict) or not isinstance(data.get("search"), list):
        raise SearchAnswerError(f"{where} has no `search` list (keys: {_keys(data)}): not a wbsearchentities result")
    for n, hit in enumerate(data["search"]):
        if not isinstance(hit, dict) or "concepturi" not in hit or "id" not in hit:
            raise SearchAnswerError(f"{where}: hit {n} has no `id` and `concepturi` (keys: {_keys(hit)}): "
                                    "the API's format changed")
        if wrong := [f"`{k}` is a {type(hit[k]).__name__}, not a {kind.__name__}"
                     for k, kind in WBSEARCH_HIT_TYPES.items() if k in hit and not isinstance(hit[k], kind)]:
            raise SearchAnswerError(f"{where}: hit {n} ({hit['id']}): {'; '.join(wrong)}: the API's format changed")


def _check_fulltext(data: Any, error: Any, where: str) -> None:
    """A ``list=search`` answer (CirrusSearch's full text) in the shape KIF's ``wikidata-wapi-query`` reads."""
    if error is not None:
        raise SearchAnswerError(f"{where}: API error {json.dumps(error)[:300]}")
    query = data.get("query") if isinstance(data, dict) else None
    if not isinstance(query, dict) or not isinstance(query.get("search"), list):
        raise SearchAnswerError(f"{where} has no `query.search` list (keys: {_keys(data)})")
    for n, hit in enumerate(query["search"]):
        if not isinstance(hit, dict) or not isinstance(hit.get("title"), str):
            raise SearchAnswerError(f"{where}: hit {n} has no `title` (keys: {_keys(hit)})")


async def check_lookup(response: httpx.Response) -> None:
    """Raises :class:`SearchAnswerError` for a 200 of DBpedia Lookup that is not a ``docs`` list of resources."""
    if response.status_code != 200:
        return
    data = await _json(response, "DBpedia Lookup")
    where = f"DBpedia Lookup answer from {response.request.url.host}"
    if not isinstance(data, dict) or not isinstance(data.get("docs"), list):
        raise SearchAnswerError(f"{where} has no `docs` list (keys: {_keys(data)}): not a Lookup result")
    for n, doc in enumerate(data["docs"]):
        resource = doc.get("resource") if isinstance(doc, dict) else None
        if not isinstance(resource, list) or not resource or not isinstance(resource[0], str):
            raise SearchAnswerError(f"{where}: doc {n} has no `resource` list (keys: {_keys(doc)})")


async def _json(response: httpx.Response, service: str) -> Any:
    await response.aread()
    try:
        return json.loads(response.content)
    except ValueError:
        start = response.content[:80].decode("utf-8", "replace")
        raise SearchAnswerError(f"{service} at {response.request.url.host} answered something that is not JSON: "
                                f"{start!r}") from None


def _keys(data: Any) -> str:
    return ", ".join(sorted(map(str, data))) if isinstance(data, dict) else type(data).__name__
