"""Building the knowledge base from a tiny synthetic data folder: idempotence, rebuilds, damage, datatypes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from kifqa.config import Settings
from kifqa.data import paths
from kifqa.errors import KBError
from kifqa.kb.build import VERSION, build, inputs_digest, kb_dir, locate
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.spec import open_kb

Maker = Callable[..., Settings]


def test_second_build_is_a_no_op(tiny_settings: Maker) -> None:
    settings = tiny_settings()
    first, built = build(settings)
    assert built and first.manifest["counts"]["statements"] == 7
    stamp = (first.root / "manifest.json").stat().st_mtime_ns
    again, built_again = build(settings)
    assert not built_again and again.root == first.root
    assert (first.root / "manifest.json").stat().st_mtime_ns == stamp
    assert locate(settings).root == first.root
    # the hash names a link to the one build folder; no temporary folder is left
    assert sorted(p.name for p in kb_dir(settings).iterdir()) == sorted([first.digest, first.root.name])
    assert (kb_dir(settings) / first.digest).resolve() == first.root


def test_changed_input_rebuilds(tiny_settings: Maker, tiny_data: dict[str, Any]) -> None:
    settings = tiny_settings()
    first, _ = build(settings)
    tiny_data["triples"].append(("Q2", "P10", "Q1"))
    (settings.data_dir / paths.TRIPLES).write_text("".join("\t".join(t) + "\n" for t in tiny_data["triples"]))
    second, built = build(settings)
    assert built and second.digest != first.digest
    assert second.manifest["counts"]["statements"] == 8


def test_force_rebuilds_beside_the_build_in_use(tiny_settings: Maker) -> None:
    settings = tiny_settings()
    first, _ = build(settings)  # this process now uses it
    again, built = build(settings, force=True)
    assert built and again.root != first.root and again.manifest["built_at"] >= first.manifest["built_at"]
    assert locate(settings).root == again.root and first.complete(), "the build in use is kept"


def test_half_written_build_does_not_count(tiny_settings: Maker) -> None:
    settings = tiny_settings()
    digest = inputs_digest(settings.data_dir)
    (kb_dir(settings) / digest / "oxigraph").mkdir(parents=True)  # as if a build died before its manifest
    with pytest.raises(KBError, match="run `kifqa kb build`"):
        locate(settings)
    built, new = build(settings)
    assert new and (built.root / "manifest.json").is_file()


def test_damaged_store_is_a_clear_error(tiny_settings: Maker) -> None:
    settings = tiny_settings()
    built, _ = build(settings)
    for path in built.store_dir.iterdir():
        if path.is_file():
            path.write_bytes(b"garbage")
    with pytest.raises(KBError, match="unreadable.*kifqa kb build --force"):
        open_kb("local", settings)
    build(settings, force=True)
    asyncio.run(open_kb("local", settings).aclose())


def test_damaged_label_index_is_a_clear_error(tiny_settings: Maker) -> None:
    settings = tiny_settings()
    built, _ = build(settings)
    built.index_path.write_bytes(b"not a database" * 100)
    with pytest.raises(KBError, match="label index .* is unreadable.*--force"):
        open_kb("local", settings)


def test_manifest_describes_the_build(tiny_settings: Maker) -> None:
    settings = tiny_settings()
    built, _ = build(settings)
    manifest = json.loads((built.root / "manifest.json").read_text())
    assert manifest["hash"] == built.digest and manifest["version"] == VERSION
    assert manifest["data_dir"] == str(settings.data_dir)
    assert manifest["counts"] == {"statements": 7, "rdf_triples": manifest["counts"]["rdf_triples"], "items": 5,
                                  "properties": 6, "names": 14}


@pytest.fixture
def tiny_kb(tiny_settings: Maker) -> KifKnowledgeBase:
    settings = tiny_settings()
    build(settings)
    return open_kb("local", settings)


def _run(kb: KifKnowledgeBase, call: Callable[[KifKnowledgeBase], Any]) -> Any:
    async def go() -> Any:
        try:
            return await call(kb)
        finally:
            await kb.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(("property", "value", "value_type", "value_label"), [
    ("P10", "Q3", "item", "Alpha"),
    ("P11", "HIP 71683", "external_id", "HIP 71683"),
    ("P12", "2.18", "quantity", "2.18"),
    ("P13", "1689-12-01T00:00:00+00:00", "time", "1689-12-01"),
    ("P14", "https://example.org/alpha", "iri", "https://example.org/alpha"),
])
def test_each_datatype_round_trips(tiny_kb: KifKnowledgeBase, property: str, value: str, value_type: str,
                                   value_label: str) -> None:
    result = _run(tiny_kb, lambda kb: kb.facts("Q1", property, "forward"))
    [fact] = result.facts
    assert (fact.subject, fact.subject_label, fact.property) == ("Q1", "Alpha Centauri", property)
    assert (fact.value, fact.value_type, fact.value_label) == (value, value_type, value_label)


def test_unlabelled_items_show_their_id(tiny_kb: KifKnowledgeBase) -> None:
    result = _run(tiny_kb, lambda kb: kb.facts("Q1", "P10", "backward"))
    assert [(f.subject, f.subject_label) for f in result.facts] == [("Q5", "Q5")]


def test_properties_of_lists_both_directions(tiny_kb: KifKnowledgeBase) -> None:
    uses = _run(tiny_kb, lambda kb: kb.properties_of("Q1")).uses
    assert [(u.property.id, u.direction) for u in uses] == [
        ("P10", "backward"), ("P10", "forward"), ("P11", "forward"), ("P12", "forward"),
        ("P13", "forward"), ("P14", "forward")]
    p12 = next(u.property for u in uses if u.property.id == "P12")
    assert (p12.label, p12.aliases) == ("mass", ("weight",))


def test_search_tiers(tiny_kb: KifKnowledgeBase) -> None:
    async def searches(kb: KifKnowledgeBase) -> list[list[str]]:
        return [[c.id for c in await kb.search_entities(q, limit=limit)]
                for q, limit in [("alpha", 10), ("ALPHA", 1), ("beyonce", 10), ("centauri", 10)]]

    alpha, alpha_1, beyonce, centauri = _run(tiny_kb, searches)
    assert alpha == ["Q3", "Q4", "Q1"]  # label, alias, then token match
    assert alpha_1 == ["Q3", "Q4"]  # exact matches are never cut by the limit
    assert beyonce[0] == "Q2"  # accents do not matter
    assert centauri == ["Q1"]


def test_unused_properties_are_searchable(tiny_kb: KifKnowledgeBase) -> None:
    found = _run(tiny_kb, lambda kb: kb.search_properties("unused"))
    assert found[0].id == "P15" and found[0].description == "no statement uses it"


_ONTOLOGY = """@prefix dbo: <http://dbpedia.org/ontology/> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix wd: <http://www.wikidata.org/entity/> .
dbo:Place a owl:Class ; rdfs:label "place"@en .
dbo:location a owl:ObjectProperty ; rdfs:domain dbo:Place ; rdfs:range dbo:Place ; owl:equivalentProperty wd:P10 .
dbo:discovered a owl:DatatypeProperty ; rdfs:domain dbo:Place ; owl:equivalentProperty wd:P13 .
dbo:mass a owl:DatatypeProperty ; owl:equivalentProperty wd:P12 .
"""


def test_hard_build_keeps_the_real_base_and_exports_what_it_adds(tiny_settings: Maker) -> None:
    from kifqa.kb.hard import DISTRACTOR_LABELS, DISTRACTORS

    settings = tiny_settings()
    (settings.data_dir / paths.ONTOLOGY).parent.mkdir()
    (settings.data_dir / paths.ONTOLOGY).write_text(_ONTOLOGY)
    real, _ = build(settings)
    built, new = build(settings, hard=True)
    assert new and built.root != real.root and locate(settings, hard=True).root == built.root
    assert locate(settings).root == real.root, "the real base stays as it is"
    added = [line.split("\t") for line in (built.root / DISTRACTORS).read_text().splitlines()]
    stats = built.manifest["hard"]
    assert added and len(added) == stats["statements_added"] == built.manifest["counts"]["statements"] - 7
    assert stats["fan_out_hard"] is None  # no train and valid files here
    real_forward = {("Q1", "P10"), ("Q2", "P10"), ("Q1", "P11"), ("Q1", "P12"), ("Q1", "P13"), ("Q1", "P14"),
                    ("Q5", "P10")}
    assert ["Q2", "P13"] in [t[:2] for t in added]  # Q2 is a place too: it gets a discovery date
    assert not [t for t in added if (t[0], t[1]) in real_forward]
    assert json.loads((built.root / DISTRACTOR_LABELS).read_text()).keys() == {
        id for t in added for id in (t[0], t[2]) if id.startswith("Q") and int(id[1:]) > 10 ** 9}
    assert not (built.root / "kb.nt").exists()

    async def facts() -> tuple[set[str], set[str]]:
        hard_kb, real_kb = open_kb("local-hard", settings), open_kb("local", settings)
        try:
            found = [{f.subject for f in (await kb.facts("Q3", "P10", "backward")).facts} for kb in (real_kb, hard_kb)]
            return found[0], found[1]
        finally:
            await hard_kb.aclose()
            await real_kb.aclose()

    in_real, in_hard = asyncio.run(facts())
    assert in_real == {"Q1", "Q2"} and in_real <= in_hard

    again, _ = build(settings, hard=True, force=True)
    assert again.root != built.root
    assert (again.root / DISTRACTORS).read_bytes() == (built.root / DISTRACTORS).read_bytes()
    assert (again.root / DISTRACTOR_LABELS).read_bytes() == (built.root / DISTRACTOR_LABELS).read_bytes()
