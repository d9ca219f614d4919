"""``--kb wikidata`` (``kb.wikidata_lookups: api``) labels the many subjects of a large inverse lookup from WDQS in
one ``VALUES`` query, not 50 a request from the Wikidata API (one request at a time); a few labels still come from
the API."""

from __future__ import annotations

import asyncio
from typing import Any

from kifqa.bench.standins.wikidata_api import WikidataAPILike
from kifqa.bench.wdqs_like import WDQSLike
from kifqa.config import Settings
from kifqa.kb.build import BuiltKB
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.spec import open_kb

CONTACT = "https://github.com/kifqa-tester (kifqa-tester@users.noreply.github.com)"


def _labels(settings: Settings, front: WDQSLike, api: WikidataAPILike, mode: str,
            *asks: list[str]) -> list[dict[str, str]]:
    kb = open_kb("wikidata", settings.override(kb={
        "contact": CONTACT, "endpoints": {"query.wikidata.org": front.url, "www.wikidata.org": api.url},
        "wikidata_lookups": mode}))
    assert isinstance(kb, KifKnowledgeBase)

    async def go() -> list[dict[str, str]]:
        try:
            return [await kb.labels(ask) for ask in asks]
        finally:
            await kb.aclose()
    return asyncio.run(go())


def test_many_item_labels_come_from_one_wdqs_query(settings: Settings, built_kb: BuiltKB,
                                                   oxigraph_server: str) -> None:
    with WDQSLike(oxigraph_server, latency_s=0.0, dialect="blazegraph") as front, \
            WikidataAPILike(built_kb.index_path, latency_s=0.0, statements=oxigraph_server) as api:
        items = sorted(id for id, e in api.names.by_id.items() if e.kind == "item" and e.label)
        many, few = items[:180], items[180:190]
        counts: dict[str, Any] = {}
        for mode in ("sparql", "api"):
            front.reset_counts()
            api.reset_counts()
            counts[mode] = (_labels(settings, front, api, mode, many, few), front.counts.requests,
                            dict(api.counts.by_action))
    (labels, few_labels), _, _ = counts["sparql"]
    (new_labels, new_few_labels), wdqs_requests, api_requests = counts["api"]
    assert new_labels == labels and len(labels) == len(many)
    assert new_few_labels == few_labels and len(few_labels) == len(few)
    # 180 items: one WDQS query, no API request; 10 more: one API request (the stand-in counts it by action), no WDQS
    # query.
    assert (wdqs_requests, api_requests) == (1, {"wbgetentities": 1})
