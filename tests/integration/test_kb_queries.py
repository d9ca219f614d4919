"""The real base, through both the in-process store and the real Oxigraph server (KIF ``wikidata-sparql``):
sampled statements of kb_triples.tsv come back, with labels, through every KB call and through KIF directly.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from kif_lib import Filter, Item, Property, Store

from kifqa.config import Settings
from kifqa.data import paths, wikidata
from kifqa.data.text import index_key
from kifqa.errors import KBError
from kifqa.kb.base import EntityProperties
from kifqa.kb.build import BuiltKB
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.spec import open_kb

WD = "http://www.wikidata.org/entity/"
SAMPLE = 12


@pytest.fixture(scope="module")
def triples(data_dir: Path) -> list[tuple[str, str, str]]:
    with open(data_dir / paths.TRIPLES, encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")) for line in f]  # type: ignore[misc]  # three columns a line


@pytest.fixture(scope="module")
def dataset(data_dir: Path) -> wikidata.Dataset:
    return wikidata.load(data_dir)


@pytest.fixture(scope="module")
def sample(triples: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return random.Random(2).sample(triples, SAMPLE)


@pytest.fixture(params=["in-process", "server"])
def kb(request: pytest.FixtureRequest) -> KifKnowledgeBase:
    return request.getfixturevalue("local_kb" if request.param == "in-process" else "server_kb")


def test_forward_facts_are_exactly_the_data(kb: KifKnowledgeBase, triples: list[tuple[str, str, str]],
                                            sample: list[tuple[str, str, str]], dataset: wikidata.Dataset) -> None:
    async def check() -> None:
        for s, p, _ in sample:
            result = await kb.facts(s, p, "forward")
            assert {f.value for f in result.facts} == {o for s2, p2, o in triples if (s2, p2) == (s, p)}
            for f in result.facts:
                assert f.subject_label == (dataset.items[s].label or s)
                assert f.property_label == dataset.properties[p].label
                assert f.value_label == (dataset.items[f.value].label or f.value)
                assert f.value_type == "item"
            assert not result.truncated

    asyncio.run(check())


def test_backward_facts_are_exactly_the_data(kb: KifKnowledgeBase, triples: list[tuple[str, str, str]],
                                             sample: list[tuple[str, str, str]]) -> None:
    async def check() -> None:
        for _, p, o in sample:
            result = await kb.facts(o, p, "backward")
            assert {f.subject for f in result.facts} == {s for s, p2, o2 in triples if (p2, o2) == (p, o)}

    asyncio.run(check())


def test_properties_of_lists_the_distinct_properties_of_the_data(
        kb: KifKnowledgeBase, triples: list[tuple[str, str, str]], sample: list[tuple[str, str, str]],
        dataset: wikidata.Dataset) -> None:
    async def check() -> None:
        for entity in [s for s, _, _ in sample[:6]] + [o for _, _, o in sample[:6]]:
            found = await kb.properties_of(entity)
            uses = found.uses
            expected = {(p, "forward") for s, p, _ in triples if s == entity}
            expected |= {(p, "backward") for _, p, o in triples if o == entity}
            assert [(u.property.id, u.direction) for u in uses] == sorted(
                expected, key=lambda u: (u[1], int(u[0][1:]))) and not found.truncated
            for u in uses:
                assert u.property.label == dataset.properties[u.property.id].label
                assert u.property.description == dataset.properties[u.property.id].description

    asyncio.run(check())


#: The United States: the value of 1,561 statements of 7 properties (855 of P27, one of P112).
USA = "Q30"


@pytest.mark.parametrize("spec", ["local", "server"])
def test_properties_are_listed_whole_however_many_statements_share_them(
        spec: str, settings: Settings, triples: list[tuple[str, str, str]], oxigraph_server: str,
        built_kb: BuiltKB) -> None:
    """max_results bounds distinct properties, not statements; what it cuts is flagged."""
    backward = {p for _, p, o in triples if o == USA}
    statements = [t for t in triples if USA in (t[0], t[2])]
    def bounded(max_results: int) -> KifKnowledgeBase:
        return open_kb("local" if spec == "local" else f"sparql+wikidata:{oxigraph_server}",
                       settings.model_copy(update={"kb": settings.kb.model_copy(update={"max_results": max_results})}))

    forward: dict[str, set[str]] = defaultdict(set)
    for s, p, _ in triples:
        forward[s].add(p)
    busy = max(forward, key=lambda s: (len(forward[s]), s))
    small, tiny = bounded(10), bounded(len(forward[busy]) - 1)
    try:
        found = asyncio.run(small.properties_of(USA))
        assert len(statements) > 100 * 10 and 5 < len(backward) <= 10
        assert {u.property.id for u in found.uses if u.direction == "backward"} == backward
        assert not found.truncated
        facts = asyncio.run(small.facts(USA, "P27", "backward"))
        assert len(facts.facts) == 10 and facts.truncated
        # More distinct properties than max_results: the list is cut and says so.
        cut = asyncio.run(tiny.properties_of(busy))
        assert cut.truncated and len([u for u in cut.uses if u.direction == "forward"]) == len(forward[busy]) - 1
        assert not asyncio.run(small.properties_of(busy)).truncated
    finally:
        asyncio.run(small.aclose())
        asyncio.run(tiny.aclose())


def test_filter_reports_the_kif_filter_and_its_sparql(kb: KifKnowledgeBase) -> None:
    result = asyncio.run(kb.facts("Q1001195", "P19", "forward"))
    assert [(f.value, f.value_label) for f in result.facts] == [("Q60", "New York City")]
    assert result.filter.startswith("Filter(") and f"{WD}Q1001195" in result.filter and f"{WD}P19" in result.filter
    assert "SELECT" in result.sparql and f"<{WD}Q1001195>" in result.sparql


def test_labels(kb: KifKnowledgeBase) -> None:
    labels = asyncio.run(kb.labels(["Q60", "P19", "Q5950", "Q10339444", "Q999999999"]))
    assert labels == {"Q60": "New York City", "P19": "place of birth", "Q5950": "James Brown"}


def test_aliases_and_descriptions_come_back(kb: KifKnowledgeBase, dataset: wikidata.Dataset) -> None:
    [prop, *_] = asyncio.run(kb.search_properties("place of birth"))
    assert prop.id == "P19" and "born in" in prop.aliases
    assert prop.description == dataset.properties["P19"].description
    [item, *_] = asyncio.run(kb.search_entities("Tudor dynasty"))
    assert (item.id, item.label, item.aliases) == ("Q101978", "House of Tudor", ("Tudor dynasty",))


def _names(dataset: wikidata.Dataset) -> dict[str, set[str]]:
    by_name: dict[str, set[str]] = defaultdict(set)
    for item in dataset.items.values():
        for name in (item.label, *item.aliases):
            by_name[index_key(name)].add(item.id)
    return by_name


def test_search_finds_every_exact_match_first(kb: KifKnowledgeBase, dataset: wikidata.Dataset) -> None:
    by_name = _names(dataset)
    shared = sorted(name for name, ids in by_name.items() if len(ids) > 1)
    queries = ["james brown", "James Brown", *random.Random(3).sample(shared, 8)]

    async def check() -> None:
        for query in queries:
            expected = by_name[index_key(query)]
            found = await kb.search_entities(query, limit=1)
            assert {c.id for c in found[:len(expected)]} == expected, query
            assert all(c.score >= 2 for c in found[:len(expected)])

    asyncio.run(check())
    assert by_name["james brown"] == {"Q5950", "Q6130343"}


@pytest.mark.parametrize(("text", "first"), [("michael dertouzos", "Q92994"),  # Michalis Dertouzos
                                             ("tigris river", "Q35591")])  # Tigris
def test_a_name_holding_the_rarer_word_comes_first(local_kb: KifKnowledgeBase, text: str, first: str) -> None:
    """Where no name holds every word, one that holds the rarest ("dertouzos", "tigris") comes before the most popular
    ones that hold a common word ("Michael Balcon", "Mississippi River")."""
    found = asyncio.run(local_kb.search_entities(text, limit=50))
    assert found[0].id == first, [c.label for c in found[:3]]


def test_born_in_is_p19(kb: KifKnowledgeBase) -> None:
    assert asyncio.run(kb.search_properties("born in"))[0].id == "P19"


@pytest.mark.parametrize(("text", "message"), [("", "empty"), ("   ", "empty"),
                                               ("x" * 10_240, "10240 characters long")])
def test_bad_search_text(kb: KifKnowledgeBase, text: str, message: str) -> None:
    with pytest.raises(KBError, match=message):
        asyncio.run(kb.search_entities(text))
    with pytest.raises(KBError, match=message):
        asyncio.run(kb.search_properties(text))


@pytest.mark.parametrize("text", ["-", "*", "?", "!", "...", "- * ?"])
def test_text_without_a_word_links_nothing(kb: KifKnowledgeBase, text: str) -> None:
    assert asyncio.run(kb.search_entities(text)) == []
    assert asyncio.run(kb.search_properties(text)) == []
    assert asyncio.run(kb.search_entities("james brown")), "a text with words still finds its names"


def test_unknown_entities_have_nothing(kb: KifKnowledgeBase) -> None:
    assert asyncio.run(kb.properties_of("Q999999999")) == EntityProperties(uses=())
    assert asyncio.run(kb.facts("Q999999999", "P19", "forward")).facts == ()


def test_bad_arguments(kb: KifKnowledgeBase) -> None:
    with pytest.raises(KBError, match="not an entity id"):
        asyncio.run(kb.facts("james brown", "P19", "forward"))
    with pytest.raises(KBError, match="direction"):
        asyncio.run(kb.facts("Q60", "P19", "sideways"))  # type: ignore[arg-type]  # a wrong direction, on purpose


def test_many_loops_and_threads_at_once(local_kb: KifKnowledgeBase, triples: list[tuple[str, str, str]]) -> None:
    subjects = sorted({s for s, _, _ in triples})[:10]
    expected = {s: sorted({p for s2, p, _ in triples if s2 == s}) for s in subjects}
    results: list[dict[str, list[str]]] = []

    def worker() -> None:
        async def run() -> dict[str, list[str]]:
            uses = await asyncio.gather(*(local_kb.properties_of(s) for s in subjects))
            return {s: sorted({u.property.id for u in us.uses if u.direction == "forward"})
                    for s, us in zip(subjects, uses)}

        results.append(asyncio.run(run()))

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 3


def test_closed_kb_refuses_calls(settings: Settings, built_kb: BuiltKB) -> None:
    kb = open_kb("local", settings)
    asyncio.run(kb.aclose())
    asyncio.run(kb.aclose())  # idempotent
    with pytest.raises(KBError, match="closed"):
        asyncio.run(kb.labels(["Q60"]))


@pytest.fixture(params=["in-process", "server"])
def kif_store(request: pytest.FixtureRequest, built_kb: BuiltKB) -> Iterator[Store]:
    if request.param == "in-process":
        store = Store("kifqa-oxigraph", built_kb.store_dir)
    else:
        store = Store("wikidata-sparql", request.getfixturevalue("oxigraph_server"), page_size=100_000)
    yield store
    store.close()


def test_kif_filters_directly(kif_store: Store, sample: list[tuple[str, str, str]],
                              triples: list[tuple[str, str, str]]) -> None:
    for s, p, o in sample[:6]:
        subject, prop, value = Item(WD + s), Property(WD + p), Item(WD + o)
        assert prop.iri in {q.iri for q in kif_store.filter_p(subject=subject)}
        assert prop.iri in {q.iri for q in kif_store.filter_p(value=value)}
        assert value in set(kif_store.filter_v(subject=subject, property=prop))
        assert subject in set(kif_store.filter_s(property=prop, value=value))
        stmts = list(kif_store.filter(subject=subject, property=prop, snak_mask=Filter.VALUE_SNAK))
        assert {st.snak.value for st in stmts} == {Item(WD + o2) for s2, p2, o2 in triples if (s2, p2) == (s, p)}
