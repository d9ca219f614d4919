""":class:`ItemLabels`: the English labels of many items from WDQS, in a few ``VALUES`` queries.

An inverse lookup may give thousands of statements (the people of one occupation or ethnic group), and each of
their subjects needs its label. The Wikidata API gives 50 entities a request, one request at a time: 5,000
subjects would hold it for 100 requests. WDQS answers them in one query per :data:`PER_QUERY` items, charged
about what one lookup is. KIF compiles the query once (an OR of two stand-in items,
:class:`~kifqa.kb.sparql.BatchShapes`); each batch writes its items into the ``VALUES`` block.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kif_lib import Filter, LabelProperty
from kif_lib.compiler.sparql.results import SPARQL_Results
from kif_lib.model import OrFingerprint

from kifqa.errors import KBError
from kifqa.kb import ids
from kifqa.kb.sparql import BatchShapes, NameShape, Projection

#: Items of one query at most (~45 KB of ``VALUES``, posted).
PER_QUERY = 1000
#: The query's ``LIMIT``: an item has one English label; a result reaching it may be cut.
_LIMIT = 2 * PER_QUERY


def _label_filter(items: OrFingerprint, _: object) -> Filter:
    return Filter(subject=items, property=LabelProperty(), language="en", snak_mask=Filter.VALUE_SNAK)


class ItemLabels:
    """English labels of items (ids, ``Q…``) asked of WDQS.

    Args:
        shapes: The store's batch shapes (they compile the query once).
        select: Runs one query under the store's limits and retries; its SPARQL results.
    """

    def __init__(self, shapes: BatchShapes, *, select: Callable[[str], Awaitable[SPARQL_Results]]) -> None:
        self._shapes = shapes
        self._select = select

    async def labels(self, items: list[str]) -> dict[str, str] | None:
        """The label of each of ``items`` (``""`` for one without an English label); ``None`` where the store's
        mapping does not compile the query as a batch (the caller asks elsewhere)."""
        chunks = [items[i:i + PER_QUERY] for i in range(0, len(items), PER_QUERY)]
        queries = [self._shapes.bind(_label_filter, [(ids.entity(id), None) for id in chunk],
                                     projection=Projection.SUBJECT | Projection.VALUE, limit=_LIMIT)
                   for chunk in chunks]
        if not chunks or any(q is None for q in queries):
            return None
        results = await asyncio.gather(*(self._select(q.query) for q in queries if q is not None))
        found: dict[str, str] = dict.fromkeys(items, "")
        for result in results:
            pairs = NameShape.read(result)
            if len(pairs) >= _LIMIT:
                raise KBError(f"{len(pairs)} label rows for {PER_QUERY} items reach the query's limit: "
                              "the result may be cut")
            for iri, label in pairs:
                if (id := ids.to_id(iri)) in found:
                    found[id] = label
        return found
