"""``--kb wikidata`` over WDQS's graph split: two WDQS-like stand-ins over two local builds, the main graph and the
scholarly articles' graph (with an entity the main one has no statements on), named by ``kb.endpoints``."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kifqa.bench.standins.wikidata_api import WikidataAPILike
from kifqa.bench.wdqs_like import WDQSLike
from kifqa.config import Settings
from kifqa.kb.build import build
from kifqa.kb.server import OxigraphServer
from kifqa.kb.spec import open_kb
from kifqa.kb.split import ScholarlySplit
from tests.conftest import TINY

CONTACT = "https://github.com/kifqa-tester (kifqa-tester@users.noreply.github.com)"
#: The main graph: the tiny base without Q2's statement, which only the scholarly graph has.
MAIN: dict[str, Any] = {**copy.deepcopy(TINY), "triples": [t for t in TINY["triples"] if t[0] != "Q2"]}


@pytest.fixture
def split(tiny_settings: Callable[..., Settings]) -> Iterator[tuple[ScholarlySplit, WDQSLike, WDQSLike]]:
    main_settings, scholarly_settings = tiny_settings(MAIN, "main"), tiny_settings(TINY, "scholarly")
    main_kb, scholarly_kb = build(main_settings)[0], build(scholarly_settings)[0]
    with (OxigraphServer(main_kb.store_dir) as main_store, OxigraphServer(scholarly_kb.store_dir) as articles_store,
          WDQSLike(main_store.url, latency_s=0.0, charge_s=0.0, dialect="blazegraph", record=True) as main,
          WDQSLike(articles_store.url, latency_s=0.0, charge_s=0.0, dialect="blazegraph", record=True) as articles,
          WikidataAPILike(main_kb.index_path, latency_s=0.0) as api):
        kb = open_kb("wikidata", main_settings.override(kb={"contact": CONTACT, "wikidata_lookups": "sparql", "endpoints": {
            "query.wikidata.org": main.url, "query-scholarly.wikidata.org": articles.url,
            "www.wikidata.org": api.url}}))
        assert isinstance(kb, ScholarlySplit)
        try:
            yield kb, main, articles
        finally:
            asyncio.run(kb.aclose())


def test_an_entity_only_on_the_scholarly_host_is_answered_from_there(
        split: tuple[ScholarlySplit, WDQSLike, WDQSLike]) -> None:
    kb, main, articles = split

    async def ask() -> tuple[Any, Any]:
        return await kb.properties_of("Q2"), await kb.facts("Q2", "P10", "forward")

    properties, facts = asyncio.run(ask())
    assert ("P10", "forward") in {(use.property.id, use.direction) for use in properties.uses}
    assert [fact.value for fact in facts.facts] == ["Q3"]
    assert main.received and articles.received


def test_an_entity_on_the_main_host_never_queries_the_scholarly_one(
        split: tuple[ScholarlySplit, WDQSLike, WDQSLike]) -> None:
    kb, main, articles = split

    async def ask() -> tuple[Any, Any, Any]:
        return (await kb.properties_of("Q1"), await kb.facts("Q1", "P10", "forward"),
                await kb.facts("Q1", "P12", "backward"))

    properties, located, none = asyncio.run(ask())
    assert ("P10", "forward") in {(use.property.id, use.direction) for use in properties.uses}
    assert [fact.value for fact in located.facts] == ["Q3"] and none.facts == ()
    assert main.received and articles.received == []
