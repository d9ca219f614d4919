"""``--kb wikidata`` as a user runs it: KIF's ``wikidata-wapi`` search and, by default, forward lookups from
``wbgetentities`` (inverse ones on WDQS), or every lookup through KIF's ``wdqs`` store (``kb.wikidata_lookups:
sparql``), pointed by ``kb.endpoints`` at the stand-ins (a WDQS-like front over the built base's Oxigraph, the
bench's Wikidata-API-like server over its label index and statements), with kifqa's limits, retries and User-Agent;
``--kb dbpedia`` the same way against a Virtuoso and a DBpedia-Lookup-like server."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kif_lib import Filter, Item, Property

from kifqa.api import open_pipeline
from kifqa.bench.standins.dbpedia_lookup import DBpediaLookupLike
from kifqa.bench.standins.wikidata_api import Lag, WikidataAPILike
from kifqa.bench.wdqs_like import WDQSLike
from kifqa.config import Settings
from kifqa.errors import KBError
from kifqa.kb import dbpedia
from kifqa.kb.build import BuiltKB
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.spec import open_kb, user_agent
from kifqa.kb.virtuoso import VirtuosoServer
from kifqa.pipeline.recorder import CountingKB
from kifqa.types import Question, Trace

CONTACT = "https://github.com/kifqa-tester (kifqa-tester@users.noreply.github.com)"
WD = "http://www.wikidata.org/entity/"


@pytest.fixture
def front(oxigraph_server: str) -> Iterator[WDQSLike]:
    """A WDQS-like front in Blazegraph's dialect over the built base, recording every query."""
    with WDQSLike(oxigraph_server, latency_s=0.0, dialect="blazegraph", record=True) as endpoint:
        yield endpoint


#: Both of ``kb.wikidata_lookups``' paths, for the tests whose behaviour each implements on its own.
LOOKUPS = pytest.mark.parametrize("lookups", ["api", "sparql"])


def _api(built_kb: BuiltKB, statements: str, **options: Any) -> WikidataAPILike:
    """The bench's Wikidata API stand-in over the built base, its ``wbgetentities`` giving the statements the
    SPARQL endpoint ``statements`` serves as claims (what the default ``kb.wikidata_lookups: api`` reads)."""
    return WikidataAPILike(built_kb.index_path, latency_s=0.0, statements=statements, **options)


def _public(settings: Settings, front: WDQSLike, api: WikidataAPILike, **kb: Any) -> KifKnowledgeBase:
    """``--kb wikidata`` through the stand-ins, on the default lookups unless ``kb`` names ``wikidata_lookups``."""
    return open_kb("wikidata", settings.override(kb={
        "contact": CONTACT, "endpoints": {"query.wikidata.org": front.url, "www.wikidata.org": api.url}, **kb}))


def _run(kb: KifKnowledgeBase, work: Callable[[KifKnowledgeBase], Any]) -> Any:
    async def go() -> Any:
        try:
            return await work(kb)
        finally:
            await kb.aclose()
    return asyncio.run(go())


@LOOKUPS
def test_the_public_path_answers_as_the_local_base(settings: Settings, built_kb: BuiltKB, oxigraph_server: str,
                                                   front: WDQSLike, local_kb: KifKnowledgeBase, lookups: str) -> None:
    with _api(built_kb, oxigraph_server) as api:
        async def ask(kb: KifKnowledgeBase) -> tuple[Any, ...]:
            found = await kb.search_entities("James Brown", limit=10)
            props = await kb.search_properties("place of birth", limit=10)
            uses = await kb.properties_of("Q5950")
            facts = await kb.facts("Q5950", "P175", "backward")
            return found, props, uses, facts
        found, props, uses, facts = _run(_public(settings, front, api, wikidata_lookups=lookups), ask)
    local_uses = asyncio.run(local_kb.properties_of("Q5950"))
    local_facts = asyncio.run(local_kb.facts("Q5950", "P175", "backward"))
    assert {"Q5950", "Q6130343"} <= {c.id for c in found} and found[0].label == "James Brown"
    assert props[0].id == "P19"
    assert {(u.property.id, u.direction) for u in uses.uses} == {(u.property.id, u.direction) for u in local_uses.uses}
    assert facts.facts and {f.subject for f in facts.facts} == {f.subject for f in local_facts.facts}
    if lookups == "sparql":  # KIF's `wdqs` sends WDQS's dialect; the front took it (and rewrote it for Oxigraph)
        assert front.counts.blazegraph > 0 and any("isSomeValue" in q for q in front.received or [])
    else:  # forward lookups and labels from wbgetentities' claims and terms; only the inverse ones on WDQS
        assert api.counts.requests > 2 and 0 < front.counts.requests <= 2
    # Both services saw kifqa's User-Agent with the contact, every API request carried maxlag.
    assert {f"({CONTACT})" in agent for agent in front.user_agents | api.user_agents} == {True}
    assert api.counts.requests >= 2 and api.counts.without_maxlag == 0


def test_named_subqueries_reach_the_front_unchanged(settings: Settings, built_kb: BuiltKB, oxigraph_server: str,
                                                    front: WDQSLike) -> None:
    """KIF's ``wdqs`` writes Blazegraph's named subqueries for annotated statements: they arrive as sent and are
    answered."""
    with _api(built_kb, oxigraph_server) as api:
        kb = _public(settings, front, api)

        async def annotated(kb: KifKnowledgeBase) -> list[Any]:
            f = Filter(subject=Item(WD + "Q1000094"), property=Property(WD + "P495"))  # country of origin
            return [s async for s in kb.store.afilter(filter=f, annotated=True, limit=10)]
        found = _run(kb, annotated)
    sent = [q for q in front.received or [] if "INCLUDE %" in q]
    assert sent and all(re.search(r"WITH {.*}\s*AS %(\w+).*INCLUDE %\1", q, re.DOTALL) for q in sent)
    assert front.counts.blazegraph >= len(sent) and front.counts.answered == front.counts.requests
    assert [(s.subject, s.snak.value) for s in found] == [(Item(WD + "Q1000094"), Item(WD + "Q183"))]


@LOOKUPS
def test_a_standard_sparql_mirror_is_asked_standard_sparql_only(settings: Settings, built_kb: BuiltKB,
                                                                oxigraph_server: str,
                                                                local_kb: KifKnowledgeBase, lookups: str) -> None:
    """``kb.endpoints`` to a SPARQL 1.1 mirror (QLever's kind) with ``dialect: standard``: a front that refuses
    Blazegraph's named subqueries and ``wikibase:`` functions with a 400 answers every query, as the local base
    does; the same front refuses what KIF's ``wdqs`` (WDQS's dialect, the default) sends. The api path's inverse
    lookups are standard SPARQL in either dialect."""
    def ask(kb: KifKnowledgeBase) -> Any:
        async def go(kb: KifKnowledgeBase) -> tuple[Any, ...]:
            return await kb.properties_of("Q5950"), await kb.facts("Q5950", "P175", "backward")
        return _run(kb, go)

    with WDQSLike(oxigraph_server, latency_s=0.0, dialect="strict") as mirror, _api(built_kb, oxigraph_server) as api:
        def public(dialect: str) -> KifKnowledgeBase:  # unbatched: a refused lookup leaves none pending
            return open_kb("wikidata", settings.override(kb={"contact": CONTACT, "resilience": {"retries": 0},
                                                             "wikidata_lookups": lookups,
                                                             "batch_size": 1,
                                                             "endpoints": {"query.wikidata.org": {
                                                                 "url": mirror.url, "dialect": dialect},
                                                                 "www.wikidata.org": api.url}}))
        uses, facts = ask(public("standard"))
        assert mirror.counts.refused_dialect == 0 and mirror.counts.answered == mirror.counts.requests > 0
        if lookups == "sparql":
            with pytest.raises(KBError, match="400|MalformedQuery"):
                ask(public("blazegraph"))
            assert mirror.counts.refused_dialect > 0
        else:  # the api path's inverse lookups are standard SPARQL whatever the dialect: the mirror takes them
            again, again_facts = ask(public("blazegraph"))
            assert (again, again_facts.facts) == (uses, facts.facts) and mirror.counts.refused_dialect == 0
    local_uses = asyncio.run(local_kb.properties_of("Q5950"))
    assert {(u.property.id, u.direction) for u in uses.uses} == {(u.property.id, u.direction) for u in local_uses.uses}
    assert facts.facts and {f.subject for f in facts.facts} == \
        {f.subject for f in asyncio.run(local_kb.facts("Q5950", "P175", "backward")).facts}


def test_maxlag_is_waited_out(settings: Settings, built_kb: BuiltKB, oxigraph_server: str, front: WDQSLike) -> None:
    """Lagged above ``maxlag`` for the first second: the API refuses, kifqa waits at least the Retry-After, and
    sends nothing inside it."""
    lag = Lag(lag_s=12.0, every_s=3600.0, for_s=0.5)
    with _api(built_kb, oxigraph_server, lag=lag, maxlag_retry_after_s=1.0) as api:
        started = time.monotonic()
        found = _run(_public(settings, front, api), lambda kb: kb.search_entities("James Brown", limit=10))
        took = time.monotonic() - started
    assert api.counts.maxlag_refused >= 1 and api.counts.inside_waits == 0
    assert {c.id for c in found} >= {"Q5950"} and took >= 1.0


def test_429_is_waited_out_and_searches_stay_serial(settings: Settings, built_kb: BuiltKB, oxigraph_server: str,
                                                    front: WDQSLike) -> None:
    """The API allows 2 requests a second; 8 questions search at once. Each search waits its turn (one in flight,
    the default limit), the 429s' Retry-After holds every search, and all 8 get their candidates."""
    names = ["James Brown", "Alpha", "Beyonce", "Berlin", "Paris", "London", "Madonna", "Prince"]
    with _api(built_kb, oxigraph_server, per_second=2.0, max_concurrent=1) as api:
        async def search_all(kb: KifKnowledgeBase) -> list[Any]:
            return list(await asyncio.gather(*(kb.search_entities(n, limit=5) for n in names)))
        found = _run(_public(settings, front, api), search_all)
    assert len(found) == len(names) and found[0] and found[0][0].label == "James Brown"
    assert api.counts.throttled > 0  # the API's rate is below the client's 10 a second: it had to say so
    assert api.counts.inside_waits == 0 and api.counts.max_in_flight == 1


@LOOKUPS
def test_unknown_fields_are_accepted_and_a_changed_shape_is_reported_once(
        settings: Settings, built_kb: BuiltKB, oxigraph_server: str, front: WDQSLike, caplog: pytest.LogCaptureFixture,
        lookups: str) -> None:
    """Wikidata adds fields from time to time: an answer and hits with fields kifqa does not know are read as
    before. An answer whose shape changed (no ``search`` list, a hit's label not a string) counts as no hit: the
    span goes on to the full-text search, the hits say what failed (for the question's trace), and the log says so
    once, not once a search."""
    def mangle(text: str, answer: dict[str, Any]) -> dict[str, Any]:
        if text in ("Berlin", "London"):
            return {k: v for k, v in answer.items() if k != "search"}
        if text == "Prince":
            return {**answer, "search": [{**hit, "label": 7} for hit in answer["search"]]}
        if text == "Paris":
            return {**answer, "newfield": {"x": 1}, "search": [{**hit, "sitelinks": 12, "display": {"label": {
                "value": hit["label"], "language": "en"}, "new": True}} for hit in answer["search"]]}
        return answer

    texts = ("Berlin", "London", "Prince", "Paris", "James Brown")
    with _api(built_kb, oxigraph_server, mangle=mangle) as api, caplog.at_level(logging.WARNING, logger="kifqa"):
        async def each(kb: KifKnowledgeBase) -> list[Any]:
            return [await kb.search_entities(n, limit=5) for n in texts]
        berlin, london, prince, paris, brown = _run(_public(settings, front, api, resilience={"retries": 0},
                                                              wikidata_lookups=lookups), each)
    assert paris and paris[0].label == "Paris" and not paris.failed
    assert brown[0].label == "James Brown" and not brown.failed
    for hits, id in ((berlin, "Q64"), (london, "Q84")):
        assert id in {c.id for c in hits}  # found by the full-text search
        [failed] = hits.failed
        assert "has no `search` list" in failed and "counted as no hit" in failed
    [failed] = prince.failed
    assert "hit 0" in failed and "`label` is a int, not a str" in failed
    changed = [r for r in caplog.records if "counted as no hit" in r.getMessage()]
    assert len(changed) == 1 and "has no `search` list" in changed[0].getMessage()


@LOOKUPS
def test_a_failing_full_text_search_counts_as_no_hit(settings: Settings, built_kb: BuiltKB, oxigraph_server: str,
                                                     front: WDQSLike, lookups: str) -> None:
    """An API front that refuses ``list=search`` (a proxy, a partial mirror): where the prefix search finds nothing
    the text names, the full-text fallback's error counts as no hit, the span goes on to its shorter runs, and the
    question's trace records the error."""
    with _api(built_kb, oxigraph_server, fulltext=False) as api:
        async def search(kb: KifKnowledgeBase) -> tuple[list[Any], Trace]:
            trace = Trace("q", "who was born in slovenj gradec")
            return await CountingKB(kb, trace).search_entities("was born in slovenj gradec", limit=10), trace
        gradec, trace = _run(_public(settings, front, api, wikidata_lookups=lookups), search)
    assert [(c.id, c.label) for c in gradec] == [("Q15918", "Slovenj Gradec")]
    [note] = trace.notes
    assert "full-text search" in note and 'Unrecognized value for parameter' in note and "counted as no hit" in note


def test_dbpedia_through_its_stand_ins_answers_as_the_local_dbpedia_base(
        settings: Settings, dbpedia_build: dbpedia.DBpediaBuild, virtuoso_server: VirtuosoServer,
        dbpedia_kb: KifKnowledgeBase) -> None:
    """``--kb dbpedia``: KIF's DBpedia mapping (posted as forms) against the Virtuoso, KIF's ``dbpedia-lookup``
    against the Lookup-like server."""
    resource = "http://dbpedia.org/resource/James_Brown"
    with DBpediaLookupLike(dbpedia_build.index_path, latency_s=0.0) as lookup:
        kb = open_kb("dbpedia", settings.override(kb={"contact": CONTACT, "endpoints": {
            "dbpedia.org": virtuoso_server.url, "lookup.dbpedia.org": lookup.url}}))

        async def ask(kb: KifKnowledgeBase) -> tuple[Any, ...]:
            found = await kb.search_entities("James Brown", limit=10)
            uses = await kb.properties_of(resource)
            facts = [await kb.facts(resource, u.property.id, u.direction) for u in uses.uses]
            return found, uses, facts
        found, uses, facts = _run(kb, ask)
    local_uses = asyncio.run(dbpedia_kb.properties_of(resource))
    local_facts = [asyncio.run(dbpedia_kb.facts(resource, u.property.id, u.direction)) for u in local_uses.uses]
    assert found[0].id == resource and found[0].label == "James Brown"
    assert [(u.property.id, u.direction) for u in uses.uses] == [(u.property.id, u.direction) for u in local_uses.uses]
    assert [[(f.subject, f.value) for f in r.facts] for r in facts] == \
        [[(f.subject, f.value) for f in r.facts] for r in local_facts] and facts[0].facts
    assert lookup.counts.requests == 1 and lookup.user_agents == {user_agent(settings.override(kb={"contact": CONTACT}))}


def test_dbpedia_finds_properties_by_label_and_misspelt_names_as_lookup_does(
        settings: Settings, dbpedia_build: dbpedia.DBpediaBuild, virtuoso_server: VirtuosoServer,
        dbpedia_kb: KifKnowledgeBase) -> None:
    """DBpedia Lookup searches resources only: ``--kb dbpedia`` finds a property by its exact English label through
    SPARQL, Lookup not asked. Lookup's fuzzy word queries find a misspelt name, as the local index's typo tier does,
    but not one whose first two letters differ (Lookup's fuzzy prefix length)."""
    pullman = dbpedia.DBR + "Philip_Pullman"
    with DBpediaLookupLike(dbpedia_build.index_path, latency_s=0.0) as lookup:
        kb = open_kb("dbpedia", settings.override(kb={"contact": CONTACT, "endpoints": {
            "dbpedia.org": virtuoso_server.url, "lookup.dbpedia.org": lookup.url}}))

        async def ask(kb: KifKnowledgeBase) -> tuple[Any, ...]:
            props = await kb.search_properties("Birth place", limit=5)
            asked = lookup.counts.requests
            return props, asked, *[await kb.search_entities(t, limit=10) for t in ("phillip pullman", "hilip pullman")]
        props, asked, misspelt, beheaded = _run(kb, ask)
    assert [(p.id, p.label) for p in props] == [(dbpedia.DBO + "birthPlace", "birth place")] and asked == 0
    assert props[0].description  # described from the store (rdfs:comment)
    assert pullman in {c.id for c in asyncio.run(dbpedia_kb.search_entities("phillip pullman", limit=10))}
    assert misspelt[0].id == pullman and misspelt[0].label == "Philip Pullman"
    assert pullman not in {c.id for c in beheaded}


def test_dbpedia_names_descriptions_and_shorter_runs_as_the_local_base(
        settings: Settings, dbpedia_build: dbpedia.DBpediaBuild, virtuoso_server: VirtuosoServer,
        dbpedia_kb: KifKnowledgeBase) -> None:
    """``--kb dbpedia`` without the label index: exact names are those of resources (Lookup finds no ontology class:
    "instrument" is dbo:Instrument's label only), properties are described as the index describes them, and a span
    Lookup finds nothing for is searched in its shorter runs of words."""
    birmingham = dbpedia.DBR + "Birmingham"
    texts = ["instrument", "song", "james brown", "birmingham"]
    with DBpediaLookupLike(dbpedia_build.index_path, latency_s=0.0) as lookup:
        kb = open_kb("dbpedia", settings.override(kb={"contact": CONTACT, "endpoints": {
            "dbpedia.org": virtuoso_server.url, "lookup.dbpedia.org": lookup.url}}))

        async def ask(kb: KifKnowledgeBase) -> tuple[Any, ...]:
            return (await kb.named(texts), await kb.properties_of(birmingham),
                    await kb.search_entities("English professional footballer", limit=10))
        named, uses, runs = _run(kb, ask)
    local_uses = asyncio.run(dbpedia_kb.properties_of(birmingham))
    assert named == asyncio.run(dbpedia_kb.named(texts)) == ["james brown", "birmingham"]
    assert [u.property for u in uses.uses] == [u.property for u in local_uses.uses]
    assert any(u.property.description == "where the person was born" for u in uses.uses)
    # Lookup wants every word in one name: none holds these three; of the shorter runs, "English" names an item
    assert [(c.id, c.label) for c in runs] == [(dbpedia.DBR + "English", "English")]
    local = asyncio.run(dbpedia_kb.search_entities("English professional footballer", limit=10))
    assert runs[0].id in {c.id for c in local}


@LOOKUPS
def test_the_full_text_search_finds_what_the_prefix_search_misses(settings: Settings, built_kb: BuiltKB,
                                                                  oxigraph_server: str, front: WDQSLike,
                                                                  lookups: str) -> None:
    """``wbsearchentities`` matches names by prefix, punctuation and spelling included; where it finds nothing
    the text names, the API's full-text search (words, ``word~`` misspelt) is asked, and its items are labelled
    from the store; where neither finds anything, the prefix search without the text's last word."""
    with _api(built_kb, oxigraph_server) as api:
        async def search(kb: KifKnowledgeBase) -> list[Any]:
            return [await kb.search_entities(t, limit=10) for t in ("blood the last vampire", "shinobu satou",
                                                                   "James Brown", "single-player mode game",
                                                                   "was born in slovenj gradec", "boat that rocked")]
        vampire, satou, brown, single, gradec, boat = _run(_public(settings, front, api, wikidata_lookups=lookups),
                                                           search)
    assert [(c.id, c.label) for c in vampire] == [("Q885189", "Blood: The Last Vampire")]
    # a full-text hit is described as a prefix search's is: its alias names the text, so it ranks as a namesake
    assert (boat[0].id, boat[0].label) == ("Q856805", "Pirate Radio") and "The Boat That Rocked" in boat[0].aliases
    assert ("Q11383520", "Shinobu Satō") in [(c.id, c.label) for c in satou]
    assert brown[0].label == "James Brown"
    # Neither search finds these spans' names: the prefix search of their shorter runs of words does, and only
    # an item named so is taken ("was" finds "Washington, D.C.", which is not).
    assert [(c.id, c.label) for c in single] == [("Q208850", "single-player video game")]
    assert [(c.id, c.label) for c in gradec] == [("Q15918", "Slovenj Gradec")]
    # Prefix searches that found nothing named so were followed by full-text ones (5); James Brown needed none;
    # "single-player mode game" took 2 runs ("single-player mode", "single-player"), "was born in slovenj gradec"
    # 6 (those of 4 and 3 words, "was born", "slovenj gradec"). The api path describes the full-text hits from
    # wbgetentities' terms (3 requests), the sparql path from the store.
    terms = 3 if lookups == "api" else 0
    assert api.counts.requests == 6 + 5 + 2 + 6 + terms and api.counts.without_maxlag == 0


@LOOKUPS
def test_a_changed_search_answer_lets_that_question_go_on_with_its_trace_saying_why(
        settings: Settings, built_kb: BuiltKB, oxigraph_server: str, front: WDQSLike, lookups: str) -> None:
    """Through the whole pipeline (gold drafts): the question whose search answers lost their ``search`` list goes
    on (no error) and is answered through the full-text search, its trace saying what failed; the other question
    is answered as before."""
    def mangle(text: str, answer: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in answer.items() if k != "search"} if "water lilies" in text.lower() else answer

    questions = [Question(id="sqwd-valid-200", text="what kind of film is water lilies"),
                 Question(id="sqwd-valid-212", text="who was born in aarhus")]
    with _api(built_kb, oxigraph_server, mangle=mangle) as api:
        run = settings.override(llm={"backend": "gold", "cache": None, "cache_mode": "off"}, kb={
            "spec": "wikidata", "contact": CONTACT, "wikidata_lookups": lookups,
            "endpoints": {"query.wikidata.org": front.url, "www.wikidata.org": api.url}})

        async def answer_all() -> list[Any]:
            async with open_pipeline(settings=run) as pipeline:
                return [await pipeline.answer(q) for q in questions]
        broken, fine = asyncio.run(answer_all())
    assert broken.trace.error is None and {a.answer for a in broken.answers} == {"Q130232"}
    assert any("has no `search` list" in n and "counted as no hit" in n for n in broken.trace.notes)
    assert fine.trace.error is None and fine.answers and not fine.trace.notes


def test_dbpedia_searches_any_uncommon_word_as_the_local_index_last_tier(
        settings: Settings, dbpedia_build: dbpedia.DBpediaBuild, virtuoso_server: VirtuosoServer,
        dbpedia_kb: KifKnowledgeBase) -> None:
    """Where Lookup (every word in one name) and the shorter runs find nothing the span names, the Virtuoso's
    free-text index is asked for names holding any of its uncommon words, those holding more of them, by rarity,
    first: as the local index's last tier ranks them."""
    texts = ["hearts and coronets comedy", "benny goodman", "San Giovanni in Persiceto"]
    with DBpediaLookupLike(dbpedia_build.index_path, latency_s=0.0) as lookup:
        kb = open_kb("dbpedia", settings.override(kb={"contact": CONTACT, "endpoints": {
            "dbpedia.org": virtuoso_server.url, "lookup.dbpedia.org": lookup.url}}))

        async def ask(kb: KifKnowledgeBase) -> list[Any]:
            return [await kb.search_entities(t, limit=10) for t in texts]
        found = _run(kb, ask)
    local = [asyncio.run(dbpedia_kb.search_entities(t, limit=10)) for t in texts]
    coronets, goodman, persiceto = found
    # the shorter run "hearts and" finds "Hearts and Armour" only; the name holding two of the words comes first
    assert coronets[0].label == "Kind Hearts and Coronets" == local[0][0].label
    assert "Hearts and Armour" in {c.label for c in coronets}
    # Lookup finds no name holding both words, nor any named "benny" or "goodman": those holding the rarer come first
    assert goodman and all("Goodman" in c.label for c in goodman[:4])
    assert {c.id for c in goodman[:4]} == {c.id for c in local[1][:4]}
    assert persiceto[0].label == "San Giovanni in Croce" == local[2][0].label
    assert all(c.id.startswith(dbpedia.DBR) for hits in found for c in hits)


def test_a_store_without_the_free_text_index_leaves_the_search_as_it_was(
        settings: Settings, dbpedia_build: dbpedia.DBpediaBuild, oxigraph_server: str) -> None:
    """A DBpedia mirror that is not Virtuoso (Oxigraph refuses ``bif:contains``): the any-word search fails, and
    the span keeps what Lookup's shorter runs found."""
    with DBpediaLookupLike(dbpedia_build.index_path, latency_s=0.0) as lookup:
        kb = open_kb("dbpedia", settings.override(kb={"contact": CONTACT, "resilience": {"retries": 0}, "endpoints": {
            "dbpedia.org": oxigraph_server, "lookup.dbpedia.org": lookup.url}}))

        async def ask(kb: KifKnowledgeBase) -> tuple[Any, ...]:
            found = await kb.search_entities("hearts and coronets comedy", limit=10)
            return found, kb.stats.by_kind.get("search_any_words", 0)
        found, asked = _run(kb, ask)
    assert [c.label for c in found] == ["Hearts and Armour"] and asked == 1


def test_the_api_lookups_answer_as_todays_sparql_path(settings: Settings, built_kb: BuiltKB, oxigraph_server: str,
                                                      front: WDQSLike) -> None:
    """``kb.wikidata_lookups: api`` (forward lookups and terms from ``wbgetentities``, inverse lookups coalesced on
    WDQS) gives the same properties, value types, statements and labels as today's path (every lookup through KIF's
    ``wdqs``), for held-out topics, both ways; far fewer WDQS
    queries, every API request with ``maxlag``, none inside a wait. (The local build's statements all have item
    values.)"""
    from kifqa.eval.datasets import load_sqwd
    from kifqa.kb.public import PublicKnowledgeBase

    topics = [q.topic for q in load_sqwd(settings.data_dir, "valid")[:30]]
    with _api(built_kb, oxigraph_server) as api:
        async def ask(kb: KifKnowledgeBase) -> tuple[Any, ...]:
            uses = await asyncio.gather(*(kb.properties_of(t) for t in topics))
            pairs = sorted({(t, u.property.id, u.direction) for t, found in zip(topics, uses, strict=True)
                            for u in found.uses})
            facts = await asyncio.gather(*(kb.facts(t, p, d) for t, p, d in pairs))
            valued = sorted({f.value for r in facts for f in r.facts if f.value_type == "item"})
            return uses, pairs, facts, await kb.labels([*topics, *valued])

        asked = {}
        for mode in ("sparql", "api"):
            front.reset_counts()
            kb = _public(settings, front, api, wikidata_lookups=mode)
            assert isinstance(kb, PublicKnowledgeBase) == (mode == "api")
            asked[mode] = _run(kb, ask), front.counts.requests
    (uses, pairs, facts, labels), sparql_queries = asked["sparql"]
    (new_uses, new_pairs, new_facts, new_labels), api_queries = asked["api"]
    assert new_uses == uses and new_pairs == pairs and len(pairs) >= 30
    assert [r.facts for r in new_facts] == [r.facts for r in facts]
    assert {d for _, _, d in pairs} == {"forward", "backward"}
    assert new_labels == labels and len(labels) > 15
    assert api_queries * 4 <= sparql_queries
    assert api.counts.without_maxlag == 0 and api.counts.inside_waits == 0 and api.counts.max_in_flight == 1

