""":class:`WikibaseEntities`: the Wikidata API's ``wbgetentities`` for many callers, politely.

Concurrent lookups are coalesced (:class:`~kifqa.kb.coalesce.Coalescer`) into requests of up to 50 ids (the API's
limit), one request of a kind running at a time: while one is out, the next gathers. Every request carries
``maxlag`` and the User-Agent, and goes through the caller's runner (a knowledge base's
:class:`~kifqa.kb.guard.Guard` on its search target: the API's limit, retries, ``Retry-After`` and ``maxlag`` waits).
Entities are remembered (least recently used first out), so a corpus asks each property's terms and datatype
once. Create and use it on one event loop (its HTTP client is made there on first use).
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal, TypeVar

import httpx

from kifqa.errors import KBError
from kifqa.kb.coalesce import Coalescer
from kifqa.kb.services import check_wbsearch
from kifqa.kb.wbjson import WikibaseEntity, read_entity

T = TypeVar("T")

#: Ids of one ``wbgetentities`` request at most (the API's limit without ``apihighlimits``).
MAX_IDS = 50
#: What a request asks: terms (labels, aliases, descriptions, a property's datatype), or those and the claims.
Kind = Literal["terms", "claims"]
_PROPS: dict[Kind, str] = {"terms": "labels|aliases|descriptions|datatype",
                           "claims": "labels|aliases|descriptions|datatype|claims"}
#: Runs one request: ``run(kind, call)`` awaits ``call()`` under the caller's limits and retries.
Runner = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[Any]]


class EntitiesAnswerError(KBError):
    """A ``wbgetentities`` answer that is an API error or not the API's shape."""


class WikibaseEntities:
    """``wbgetentities`` at ``url`` (an ``api.php``) for many callers.

    Args:
        url: The API's ``api.php`` (or its mirror's).
        run: Runs each request under the knowledge base's limits and retries.
        headers: Sent with every request (the User-Agent with the contact).
        timeout_s: Per request.
        maxlag_s: The ``maxlag`` of every request (``None``: none).
        wait_s: How long a request waits for more lookups after its first (:class:`Coalescer`).
        max_cached: Entities remembered at most.
    """

    def __init__(self, url: str, *, run: Runner, headers: dict[str, str], timeout_s: float, maxlag_s: int | None,
                 wait_s: float, max_cached: int = 200_000) -> None:
        self.url = url
        self._run = run
        self._headers = headers
        self._timeout_s = timeout_s
        self._params = {"maxlag": str(maxlag_s)} if maxlag_s is not None else {}
        self._client: httpx.AsyncClient | None = None
        self._cache: OrderedDict[str, WikibaseEntity | None] = OrderedDict()
        self._max_cached = max_cached
        self._lookups: Coalescer[Kind, str, WikibaseEntity | None] = Coalescer(self._batch, size=MAX_IDS,
                                                                               wait_s=wait_s)
        #: Requests sent.
        self.requests = 0

    async def terms(self, ids: Iterable[str]) -> dict[str, WikibaseEntity]:
        """The entities of ``ids`` with their terms (those the API does not have are left out)."""
        return await self._get(ids, "terms")

    async def claims(self, ids: Iterable[str]) -> dict[str, WikibaseEntity]:
        """The entities of ``ids`` with their terms and best-ranked statements."""
        return await self._get(ids, "claims")

    def cached(self, id: str) -> WikibaseEntity | None:
        """The entity of ``id`` if it is remembered."""
        return self._cache.get(id)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def _get(self, ids: Iterable[str], kind: Kind) -> dict[str, WikibaseEntity]:
        wanted = list(dict.fromkeys(ids))
        found: dict[str, WikibaseEntity | None] = {}
        missing = []
        for id in wanted:
            if id in self._cache and (kind == "terms" or self._has_claims(id)):
                self._cache.move_to_end(id)
                found[id] = self._cache[id]
            else:
                missing.append(id)
        if missing:
            for id, entity in zip(missing, await asyncio.gather(*(self._lookups.lookup(kind, id) for id in missing)),
                                  strict=True):
                found[id] = entity
        return {id: entity for id, entity in found.items() if entity is not None}

    def _has_claims(self, id: str) -> bool:
        entity = self._cache[id]
        return entity is None or entity.statements is not None

    async def _batch(self, kind: Kind, ids: list[str]) -> list[WikibaseEntity | BaseException | None]:
        """One request for ``ids`` (at most :data:`MAX_IDS`, the coalescer's size)."""
        asked = list(dict.fromkeys(ids))
        data = await self._run(f"wbgetentities {kind}", lambda: self._request(kind, asked))
        entities = data.get("entities")
        if not isinstance(entities, dict):
            raise EntitiesAnswerError(f"wbgetentities answer from {self.url} has no `entities` object "
                                      f"(keys: {', '.join(sorted(map(str, data)))})")
        read = {id: read_entity(entities[id], claims=kind == "claims") if isinstance(entities.get(id), dict) else None
                for id in asked}
        for id, entity in read.items():
            self._remember(id, entity)
        return [read[id] for id in ids]

    async def _request(self, kind: Kind, ids: list[str]) -> dict[str, Any]:
        if self._client is None:
            # As KIF's searches are given theirs (kifqa.kb.services): a maxlag refusal raises MaxlagError.
            self._client = httpx.AsyncClient(headers=self._headers, params=self._params, timeout=self._timeout_s,
                                             event_hooks={"response": [check_wbsearch]})
        self.requests += 1
        response = await self._client.get(self.url, params={
            "action": "wbgetentities", "ids": "|".join(ids), "props": _PROPS[kind], "languages": "en",
            "format": "json", **self._params})
        response.raise_for_status()
        try:
            data = response.json()
        except ValueError:
            raise EntitiesAnswerError(f"wbgetentities answer from {self.url} is not JSON: "
                                      f"{response.content[:80].decode('utf-8', 'replace')!r}") from None
        if not isinstance(data, dict):
            raise EntitiesAnswerError(f"wbgetentities answer from {self.url} is not an object")
        if "error" in data:
            raise EntitiesAnswerError(f"wbgetentities answer from {self.url}: API error "
                                      f"{json.dumps(data['error'])[:300]}")
        return data

    def _remember(self, id: str, entity: WikibaseEntity | None) -> None:
        self._cache[id] = entity
        self._cache.move_to_end(id)
        while len(self._cache) > self._max_cached:
            self._cache.popitem(last=False)
