"""The DBpedia encoding of a tiny data folder: IRIs, property mapping, counts, build folder, label index, specs,
and the Virtuoso store's request encoding (no server needed)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import rdflib
from rdflib.namespace import RDF

from kifqa.config import Settings
from kifqa.data import paths
from kifqa.data.dbpedia_map import read_links
from kifqa.errors import ConfigError, DataError, KBError
from kifqa.eval.datasets import GoldExtender, GoldQuestion
from kifqa.kb import dbpedia
from kifqa.kb.index import LabelIndex
from kifqa.kb.spec import FORMS, resolve
from kifqa.kb.virtuoso import VirtuosoServer, VirtuosoStore

DBR, DBO = dbpedia.DBR, dbpedia.DBO

ONTOLOGY = """\
@prefix : <http://dbpedia.org/ontology/> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
@prefix wikidata: <http://www.wikidata.org/entity/> .
:location a owl:ObjectProperty ; rdfs:label "Standort"@de, "location"@en ; rdfs:comment "where it is"@en ;
    owl:equivalentProperty wikidata:P10 .
:place a owl:ObjectProperty ; rdfs:label "place"@en ; owl:equivalentProperty wikidata:P10 .
:discovered a owl:DatatypeProperty ; rdfs:label "discovered"@en ; rdfs:range xsd:date ;
    owl:equivalentProperty wikidata:P13 .
:mass a owl:DatatypeProperty ; rdfs:label "mass"@en ; rdfs:range xsd:double .
:Star a owl:Class ; rdfs:label "star"@en .
"""


def _sdbqa(subject: str, query: str, predicate: str) -> dict[str, Any]:
    return {"ID": "1", "Query": query, "Subject": subject,
            "PredicateList": [{"Predicate": predicate, "Direction": "forward", "Constraint": None}]}


@pytest.fixture
def dbpedia_settings(tiny_settings: Callable[..., Settings], tiny_data: dict[str, Any]) -> Settings:
    """The tiny data folder plus a tiny ontology, a SimpleQuestions-Wikidata valid question (for the gold; there
    is no SimpleDBpediaQA file) and more items named "Alpha" or "Beyoncé": Q6 without statements, Q8 an instance
    of "star", Q10 a "baseball player", Q11 an album (it has a performer), and Q13 a film (it has a director)
    whose ``Alpha (film)`` is already Q12's label."""
    tiny_data["items"] |= {"Q6": ["alpha"], "Q7": ["star"], "Q8": ["alpha"], "Q9": ["baseball player"],
                           "Q10": ["Alpha"], "Q11": ["Beyoncé"], "Q12": ["Alpha (film)"], "Q13": ["alpha"]}
    tiny_data["properties"] += [{"id": p, "label": label, "description": "", "aliases": [], "datatype": "wikibase-item"}
                                for p, label in (("P31", "instance of"), ("P106", "occupation"), ("P175", "performer"),
                                                 ("P57", "director"))]
    tiny_data["triples"] += [("Q8", "P31", "Q7"), ("Q10", "P106", "Q9"), ("Q11", "P175", "Q2"), ("Q13", "P57", "Q2")]
    settings = tiny_settings(tiny_data)
    root = settings.data_dir
    (root / "dbpedia").mkdir()
    (root / paths.ONTOLOGY).write_text(ONTOLOGY)
    (root / paths.sqwd("valid")).write_text("Q2\tP10\tQ3\twhere is beyonce\n")
    return settings


@pytest.mark.parametrize(("label", "name"), [
    ("Sasha Vujačić", "Sasha_Vujačić"),
    ("iPod  touch", "IPod_touch"),
    ("O.K. Ken?", "O.K._Ken%3F"),
    ('Daniel "2Dark" Richards', "Daniel_%222Dark%22_Richards"),
    ("100% {x|y} [z] <a> #b ^c `d` \\e", "100%25_%7Bx%7Cy%7D_%5Bz%5D_%3Ca%3E_%23b_%5Ec_%60d%60_%5Ce"),
    ("AT&T + co", "AT&T_+_co"),
])
def test_resource_names_as_dbpedia_writes_them(label: str, name: str) -> None:
    assert dbpedia.resource_name(label) == name


def test_conversion(dbpedia_settings: Settings) -> None:
    conversion = dbpedia.convert(dbpedia_settings.data_dir)
    # two equivalents alike (no domain, no range): the first by IRI
    assert conversion.property_map == {"P10": DBO + "location"}
    assert {(t.subject, t.property, t.value) for t in conversion.dataset.triples} == {
        (DBR + "Alpha_Centauri", DBO + "location", DBR + "Alpha"),
        (DBR + "Beyoncé", DBO + "location", DBR + "Alpha"), (DBR + "Q5", DBO + "location", DBR + "Alpha_Centauri")}
    assert conversion.counts == {
        "wikidata_statements": 11, "statements": 3, "statements_without_dbpedia_property": 7,
        "statements_with_datatype_property_only": 1, "statements_not_item_to_item": 0, "resources": 13,
        "resources_qualified_by_kind": 3, "resources_qualified_by_id": 2, "mapped_wikidata_properties": 1}


def test_the_equivalent_property_applied_most_widely_is_chosen() -> None:
    ontology = rdflib.Graph().parse(format="turtle", data="""\
@prefix : <http://dbpedia.org/ontology/> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix wikidata: <http://www.wikidata.org/entity/> .
:citizenship a owl:ObjectProperty ; rdfs:domain :Person ; owl:equivalentProperty wikidata:P27 .
:nationality a owl:ObjectProperty ; rdfs:domain :Person ; rdfs:range :Country ; owl:equivalentProperty wikidata:P27 .
:activity a owl:ObjectProperty ; rdfs:domain :Person ; owl:equivalentProperty wikidata:P106 .
:occupation a owl:ObjectProperty ; rdfs:range :PersonFunction ; owl:equivalentProperty wikidata:P106 .
:builder a owl:ObjectProperty ; owl:equivalentProperty wikidata:P176 .
:manufacturer a owl:ObjectProperty ; rdfs:range :Organisation ; owl:equivalentProperty wikidata:P176 .
:almaMater a owl:ObjectProperty ; rdfs:domain :Person ; rdfs:range :School ; owl:equivalentProperty wikidata:P69 .
:training a owl:ObjectProperty ; rdfs:domain :Artist ; rdfs:range :School ; owl:equivalentProperty wikidata:P69 .
:birthYear a owl:DatatypeProperty ; owl:equivalentProperty wikidata:P569 .
""")
    # no domain first, then a stated range, then the first by IRI; datatype properties are not mapped
    assert dbpedia._property_map(ontology) == {
        "P27": DBO + "nationality", "P106": DBO + "occupation", "P176": DBO + "manufacturer", "P69": DBO + "almaMater"}


def test_resources_are_titled_from_labels_and_disambiguated_as_wikipedia_does(dbpedia_settings: Settings) -> None:
    assert dbpedia.convert(dbpedia_settings.data_dir).resources == {
        "Q1": DBR + "Alpha_Centauri", "Q4": DBR + "Gamma", "Q5": DBR + "Q5", "Q7": DBR + "Star",
        "Q9": DBR + "Baseball_player", "Q12": DBR + "Alpha_(film)",
        # of one name, the one in most statements keeps the bare title
        "Q2": DBR + "Beyoncé", "Q3": DBR + "Alpha",
        # the others are qualified by their type, occupation (a sport for players) or kind of work ...
        "Q8": DBR + "Alpha_(star)", "Q10": DBR + "Alpha_(baseball)", "Q11": DBR + "Beyoncé_(album)",
        # ... or, with none or a taken one, by their id
        "Q6": DBR + "Alpha_(Q6)", "Q13": DBR + "Alpha_(Q13)"}


def test_no_question_file_takes_part_in_the_conversion(dbpedia_settings: Settings) -> None:
    root = dbpedia_settings.data_dir
    resources, digest = dbpedia.convert(root).resources, dbpedia.inputs_digest(root)
    # a SimpleDBpediaQA question that names Q1's real page, and other SimpleQuestions-Wikidata questions
    (root / "simpledbpediaqa").mkdir()
    (root / paths.sdbqa("valid")).write_text(json.dumps({"Questions": [
        _sdbqa(DBR + "Alpha_Centauri_(star)", "Where is Alpha Centauri?", DBO + "place")]}))
    (root / paths.sqwd("valid")).write_text("Q1\tP10\tQ3\twhere is alpha centauri\n")
    assert dbpedia.convert(root).resources == resources and dbpedia.inputs_digest(root) == digest
    assert not any("simpledbpediaqa" in name or "answerable" in name for name in dbpedia.INPUTS)


def test_build_writes_rdf_index_and_manifest_once(dbpedia_settings: Settings) -> None:
    built, new = dbpedia.build(dbpedia_settings)
    assert new and built.root.name.startswith(f"dbpedia-{built.digest}-")
    assert (built.root.parent / f"dbpedia-{built.digest}").resolve() == built.root
    assert dbpedia.build(dbpedia_settings) == (built, False)
    assert dbpedia.locate(dbpedia_settings) == built
    graph = rdflib.Graph().parse(built.rdf_path, format="nt")
    assert len(graph) == built.manifest["counts"]["rdf_triples"]
    assert (rdflib.URIRef(DBO + "mass"), RDF.type, RDF.Property) in graph
    assert (rdflib.URIRef(DBR + "Alpha_Centauri"), rdflib.URIRef(DBO + "location"),
            rdflib.URIRef(DBR + "Alpha")) in graph
    assert (rdflib.URIRef(DBR + "Beyoncé"), rdflib.OWL.sameAs, rdflib.URIRef("http://www.wikidata.org/entity/Q2")) \
        in graph
    index = LabelIndex(built.index_path)
    try:
        entries = index.entries([DBO + "location", DBO + "discovered", DBO + "mass", DBR + "Gamma"])
        assert (entries[DBO + "location"].label, entries[DBO + "location"].description) == ("location", "where it is")
        assert {k: e.datatype for k, e in entries.items()} == {
            DBO + "location": "wikibase-item", DBO + "discovered": "time", DBO + "mass": "quantity", DBR + "Gamma": ""}
        assert entries[DBR + "Gamma"].aliases == ("Alpha",)
        assert [h.entry.id for h in index.search("item", "alpha", 5)][0] == DBR + "Alpha"
        assert index.value_datatypes() == ["wikibase-item"] and index.subject_kinds() == ["item"]
    finally:
        index.close()


def test_missing_inputs_and_builds(dbpedia_settings: Settings) -> None:
    with pytest.raises(KBError, match="kifqa kb build --encoding dbpedia"):
        dbpedia.locate(dbpedia_settings)
    (dbpedia_settings.data_dir / paths.ONTOLOGY).unlink()
    with pytest.raises(DataError, match="ontology.ttl is missing"):
        dbpedia.build(dbpedia_settings)


def test_specs(dbpedia_settings: Settings) -> None:
    dbpedia.build(dbpedia_settings)
    assert "local-dbpedia " in FORMS and "local-dbpedia-server[:PORT]" in FORMS
    info = resolve("local-dbpedia-server:8899", dbpedia_settings).info
    assert (info["store"], info["mapping"], info["endpoint"], info["search"]) == (
        "kifqa-virtuoso", "DBpediaMapping", "http://127.0.0.1:8899/sparql", "kifqa-dbpedia")
    assert info["search_index"].endswith("labels.sqlite")
    assert resolve("local-dbpedia-server", dbpedia_settings).info["endpoint"].endswith(":8890/sparql")
    info = resolve("kif:kifqa-virtuoso?iri=http://127.0.0.1:9/sparql&search=kifqa-dbpedia", dbpedia_settings).info
    assert (info["store"], info["search"]) == ("kifqa-virtuoso", "kifqa-dbpedia")
    with pytest.raises(ConfigError, match="not a port number"):
        resolve("local-dbpedia-server:x", dbpedia_settings)


def test_virtuoso_store_posts_url_encoded_forms_with_the_dbpedia_mapping() -> None:
    store = VirtuosoStore("kifqa-virtuoso", "http://127.0.0.1:9/sparql", headers={"User-Agent": "t"})
    query = 'SELECT * WHERE { <http://dbpedia.org/resource/AT&T_+_%3F> ?p "a b" }'
    backend = store.backend
    assert parse_qs(backend._http_post_encode_content(query).decode()) == {"query": [query]}  # type: ignore[attr-defined]  # KIF's private httpx backend
    assert backend._headers["Content-Type"] == "application/x-www-form-urlencoded"  # type: ignore[attr-defined]  # likewise
    assert backend._headers["User-Agent"] == "t"  # type: ignore[attr-defined]  # likewise
    assert store.mapping.options.wikidata_properties is False


def test_server_without_data_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(KBError, match="no N-Triples file at .*; run `kifqa kb build --encoding dbpedia`"):
        VirtuosoServer(tmp_path / "kb.nt", graph=dbpedia.GRAPH).start()


def test_sdbqa_gold_comes_from_the_links_in_the_builds_manifest(dbpedia_settings: Settings) -> None:
    built, _ = dbpedia.build(dbpedia_settings)
    question = GoldQuestion(id="sdbqa-valid-9", text="Where is Beyoncé?", topic=DBR + "Beyoncé",
                            property=DBO + "place", answer="", dataset="sdbqa:valid")
    # its SimpleQuestions-Wikidata twin "where is beyonce" answers Q3, which the conversion named dbr:Alpha
    assert GoldExtender(dbpedia_settings.data_dir, dbpedia_links=built.links).gold(question) == {DBR + "Alpha"}
    with pytest.raises(DataError, match="kb build --encoding dbpedia --force"):
        GoldExtender(dbpedia_settings.data_dir, dbpedia_links=lambda: read_links({})).gold(question)


def test_busy_port_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "kb.nt").write_text("")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(KBError, match=f"port {s.getsockname()[1]} on 127.0.0.1 is already in use"):
            VirtuosoServer(tmp_path / "kb.nt", graph=dbpedia.GRAPH, port=s.getsockname()[1]).start()
