"""One limit per public host, shared by every KB actor of a job and held per HTTP request
(:class:`~kifqa.kb.limit.RequestLimit`): the store's endpoint, where it is another service the search's, and for
``wikidata`` over WDQS's graph split the scholarly graph's host."""

from __future__ import annotations

from typing import Literal

import ray

from kifqa.config import BatchSettings, EndpointLimit
from kifqa.kb.limit import RequestLimit
from kifqa.kb.spec import KBRoutes

#: Waiting acquirers hold a slot of the actor's concurrency each.
_MAX_WAITERS = 100_000

#: The services of a knowledge base: its store's SPARQL endpoint, its search, and WDQS's scholarly graph.
Lane = Literal["store", "search", "scholarly"]


def endpoint_limit(batch: BatchSettings, routes: KBRoutes) -> EndpointLimit | None:
    """The limit ``batch.limits`` sets on the endpoint the KB spec's store queries: its host as the spec
    resolves (:attr:`kifqa.kb.spec.KBRoutes.host`), so ``kif:wdqs`` is limited like ``wikidata``."""
    return batch.limits.get(routes.host) if routes.host else None


def lane_limits(batch: BatchSettings, routes: KBRoutes) -> tuple[EndpointLimit | None, ...]:
    """The limits ``batch.limits`` sets on each lane's host, ``None`` where it sets none: the store's endpoint
    (:func:`endpoint_limit`), the service the search queries (the Wikidata API, DBpedia Lookup; none for this
    machine's label index) and WDQS's scholarly-article host, where the spec queries it."""
    return tuple(batch.limits.get(host) if host else None
                 for host in (routes.host, routes.search_host, routes.scholarly_host))


@ray.remote(num_cpus=0, max_concurrency=_MAX_WAITERS, max_restarts=-1)  # type: ignore[call-overload]  # Ray's overloads omit max_concurrency
class EndpointLimiter:
    """Admits the requests of every KB actor to the store's endpoint and, when given ``search`` or
    ``scholarly``, to the search's service and the scholarly graph's host (each its own
    :class:`~kifqa.kb.limit.RequestLimit`, a ``lane``)."""

    def __init__(self, limit: EndpointLimit, search: EndpointLimit | None = None, *,
                 scholarly: EndpointLimit | None = None) -> None:
        self._lanes: dict[str, RequestLimit] = {"store": RequestLimit(limit)}
        if search is not None:
            self._lanes["search"] = RequestLimit(search)
        if scholarly is not None:
            self._lanes["scholarly"] = RequestLimit(scholarly)

    async def lanes(self) -> list[str]:
        """The services it limits."""
        return list(self._lanes)

    async def acquire(self, holder: str, lane: Lane = "store") -> None:
        """Waits for a free slot and for the request's turn under the rate limit, the budget and any pause."""
        await self._lanes[lane].acquire(holder)

    async def release(self, holder: str, seconds: float | None = None, lane: Lane = "store") -> None:
        """Gives back ``holder``'s slot of a request that took ``seconds`` (charged to the budget)."""
        self._lanes[lane].release(holder, seconds)

    async def forget(self, holder: str) -> None:
        """Releases every slot ``holder`` still holds."""
        for limit in self._lanes.values():
            limit.forget(holder)

    async def pause(self, seconds: float, lane: Lane = "store") -> None:
        """Starts no request for ``seconds`` (the service said ``Retry-After``)."""
        self._lanes[lane].pause(seconds)

    async def pauses(self, lane: Lane = "store") -> int:
        """How many times the service said ``Retry-After``."""
        return self._lanes[lane].pauses
