"""``--kb wikidata`` over WDQS's graph split: two WDQS-like stand-ins over two local builds, the main graph and the
scholarly articles' graph (with an entity the main one has no statements on), named by ``kb.endpoints``; on both
of ``kb.wikidata_lookups``' paths (the API stand-in gives the main graph's statements as claims)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import ray

from kifqa.batch.kbpool import open_kb_pool
from kifqa.bench.standins.wikidata_api import WikidataAPILike
from kifqa.bench.wdqs_like import WDQSLike
from kifqa.config import EndpointLimit, Settings
from kifqa.kb.build import build
from kifqa.kb.public import PublicKnowledgeBase
from kifqa.kb.server import OxigraphServer
from kifqa.kb.spec import SCHOLARLY, open_kb
from kifqa.kb.split import ScholarlySplit
from tests.conftest import TINY

CONTACT = "https://github.com/kifqa-tester (kifqa-tester@users.noreply.github.com)"
#: The main graph: the tiny base without Q2's statement, which only the scholarly graph has.
MAIN: dict[str, Any] = {**copy.deepcopy(TINY), "triples": [t for t in TINY["triples"] if t[0] != "Q2"]}


#: What the split's fixtures give: the main graph's and the scholarly graph's WDQS-like stand-ins, and the settings
#: of ``--kb wikidata`` pointed at them.
Hosts = tuple[WDQSLike, WDQSLike, Settings]


@contextmanager
def _hosts(tiny_settings: Callable[..., Settings], lookups: str, **articles_rules: Any) -> Iterator[Hosts]:
    """The stand-ins (``articles_rules``: the scholarly host's :class:`WDQSLike` rules, none by default)."""
    main_settings, scholarly_settings = tiny_settings(MAIN, "main"), tiny_settings(TINY, "scholarly")
    main_kb, scholarly_kb = build(main_settings)[0], build(scholarly_settings)[0]
    articles_rules = {"charge_s": 0.0, **articles_rules}
    with (OxigraphServer(main_kb.store_dir) as main_store, OxigraphServer(scholarly_kb.store_dir) as articles_store,
          WDQSLike(main_store.url, latency_s=0.0, charge_s=0.0, dialect="blazegraph", record=True) as main,
          WDQSLike(articles_store.url, latency_s=0.0, dialect="blazegraph", record=True, **articles_rules) as articles,
          WikidataAPILike(main_kb.index_path, latency_s=0.0, statements=main_store.url) as api):
        yield main, articles, main_settings.override(kb={
            "contact": CONTACT, "wikidata_lookups": lookups, "endpoints": {
                "query.wikidata.org": main.url, SCHOLARLY: articles.url, "www.wikidata.org": api.url}})


@pytest.fixture(params=["api", "sparql"])
def hosts(request: pytest.FixtureRequest, tiny_settings: Callable[..., Settings]) -> Iterator[Hosts]:
    with _hosts(tiny_settings, request.param) as found:
        yield found


@pytest.fixture
def split(hosts: Hosts) -> Iterator[tuple[ScholarlySplit, WDQSLike, WDQSLike]]:
    main, articles, settings = hosts
    kb = open_kb("wikidata", settings)
    assert isinstance(kb, ScholarlySplit)
    assert isinstance(kb.main, PublicKnowledgeBase) == (settings.kb.wikidata_lookups == "api")
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


def test_a_main_entitys_own_statements_never_query_the_scholarly_host(
        split: tuple[ScholarlySplit, WDQSLike, WDQSLike]) -> None:
    kb, main, articles = split

    async def ask() -> tuple[Any, Any]:
        return await kb.facts("Q1", "P10", "forward"), await kb.facts("Q1", "P15", "forward")

    located, none = asyncio.run(ask())
    assert [fact.value for fact in located.facts] == ["Q3"] and none.facts == ()
    assert articles.received == []


def test_inverse_lookups_reach_the_articles_on_the_scholarly_host(
        split: tuple[ScholarlySplit, WDQSLike, WDQSLike]) -> None:
    """Q3 is a main entity (the main graph has a statement pointing at it); the article Q2 points at it too, and that
    statement is only on the scholarly host: the inverse lookups find both."""
    kb, main, articles = split

    async def ask() -> tuple[Any, Any]:
        return await kb.properties_of("Q3"), await kb.facts("Q3", "P10", "backward")

    properties, pointing = asyncio.run(ask())
    assert [(use.property.id, use.direction) for use in properties.uses] == [("P10", "backward")]
    assert sorted(fact.subject for fact in pointing.facts) == ["Q1", "Q2"]
    assert articles.received


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.slow  # the limiter the KB actors share is in the default suite: test_batch_job.py's WDQS entry
def test_the_scholarly_hosts_limit_is_shared_by_every_kb_actor(cluster: None,
                                                               tiny_settings: Callable[..., Settings]) -> None:
    """A batch job's KB actors keep the scholarly host's ``batch.limits`` entry together, as they keep WDQS's: two
    actors asking for the article at once stay within the host's query-time budget (a burst of 1 s, then 0.2 s a
    second), which either of them alone would reach, and are never answered 429."""
    with _hosts(tiny_settings, "api", budget_s=12.0, burst_s=1.0, charge_s=0.2) as (main, articles, settings):
        # under the host's budget, as WDQS_LIMIT is; one in flight, so that each query is charged before the next
        within = EndpointLimit(max_concurrent=1, budget_s_per_s=0.18, burst_s=0.9, charge_s=0.25)
        job = settings.override(kb={"spec": "wikidata"}, batch={"kb_actors": 2, "kb_cache": False, "limits": {
            **settings.batch.limits, SCHOLARLY: within}})
        pool = open_kb_pool(job, open_kb)
        actors = pool.actors
        try:
            ray.get([actor.start.remote() for actor in actors])  # both open: their asks come at once
            found = ray.get([actor.call.remote(call, args, {}) for actor in actors for call, args in (
                ("properties_of", ("Q2",)), ("facts", ("Q2", "P10", "forward")), ("facts", ("Q3", "P10", "backward")))])
        finally:
            for actor in [*actors, pool.limiter]:
                ray.kill(actor)
    assert [fact.value for fact in found[1].facts] == ["Q3"] == [fact.value for fact in found[4].facts]
    assert articles.counts.charged_s > 2 * within.burst_s  # more than both actors' bursts: the budget bound them
    assert articles.counts.throttled == 0 and articles.counts.inside_retry_after == 0
