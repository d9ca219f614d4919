"""The DBpedia-encoded base on a real Virtuoso (KIF store ``kifqa-virtuoso``, DBpedia mapping): the converted
statements of kb_triples.tsv come back through every KB call and through KIF directly, search finds resources
and ontology properties, and SimpleDBpediaQA questions whose facts were converted are answered."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from kif_lib import Filter, Item, Property
from kif_lib.vocabulary import wd

from kifqa.config import Settings
from kifqa.data import paths
from kifqa.kb import dbpedia
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.spec import endpoint_info, open_kb
from kifqa.kb.virtuoso import VirtuosoServer, VirtuosoStore
from kifqa.llm.base import Usage
from kifqa.pipeline import Pipeline
from kifqa.types import Question
from tests.fakes import ScriptedLLM

DBR, DBO = dbpedia.DBR, dbpedia.DBO
SAMPLE = 12
_SAME_AS = re.compile(r"<([^>]+)> <http://www\.w3\.org/2002/07/owl#sameAs> <http://www\.wikidata\.org/entity/(Q\d+)> \.")

Statement = tuple[str, str, str]


@dataclass(frozen=True)
class Expected:
    """The statements the base must hold: kb_triples.tsv through the build's item IRIs and property map."""

    statements: set[Statement]
    by_subject: dict[str, set[Statement]]
    by_value: dict[str, set[Statement]]


@pytest.fixture(scope="module")
def expected(data_dir: Path, dbpedia_build: dbpedia.DBpediaBuild) -> Expected:
    with open(dbpedia_build.rdf_path, encoding="utf-8") as f:
        iris = {m[2]: m[1] for line in f if (m := _SAME_AS.fullmatch(line.rstrip("\n")))}
    properties = dbpedia_build.manifest["property_map"]
    with open(data_dir / paths.TRIPLES, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    statements = {(iris[s], properties[p], iris[o]) for s, p, o in rows if p in properties}
    by_subject, by_value = defaultdict(set), defaultdict(set)
    for st in statements:
        by_subject[st[0]].add(st)
        by_value[st[2]].add(st)
    return Expected(statements, by_subject, by_value)


@pytest.fixture(scope="module")
def sample(expected: Expected) -> list[Statement]:
    return random.Random(8).sample(sorted(expected.statements), SAMPLE)


def run(coro):
    return asyncio.run(coro)


def test_server_holds_every_triple_of_the_build(virtuoso_server: VirtuosoServer,
                                                dbpedia_build: dbpedia.DBpediaBuild) -> None:
    assert virtuoso_server.triples == dbpedia_build.manifest["counts"]["rdf_triples"]
    counts = dbpedia_build.manifest["counts"]
    assert counts["statements"] + counts["statements_without_dbpedia_property"] + \
        counts["statements_with_datatype_property_only"] + counts["statements_not_item_to_item"] == \
        counts["wikidata_statements"]


def test_resources_are_titled_from_labels_as_wikipedia_does(dbpedia_build: dbpedia.DBpediaBuild) -> None:
    resources, counts = dbpedia_build.manifest["resources"], dbpedia_build.manifest["counts"]
    assert len(set(resources.values())) == len(resources) == counts["resources"]
    # the country and the singer keep the bare title; the film (it has a director) and the album (a performer)
    # are qualified by their kind, as Wikipedia titles them
    assert (resources["Q1028"], resources["Q577754"]) == (DBR + "Morocco", DBR + "Morocco_(film)")
    assert (resources["Q41594"], resources["Q243789"]) == (DBR + "Christina_Aguilera", DBR + "Christina_Aguilera_(album)")
    assert counts["resources_qualified_by_kind"] > 200 and counts["resources_qualified_by_id"] < 1000


def test_the_build_reads_no_simpledbpediaqa_file(data_dir: Path, tmp_path: Path,
                                                 dbpedia_build: dbpedia.DBpediaBuild) -> None:
    # the data folder without simpledbpediaqa/ (links to the real files) converts to the same resources
    for folder in ("simplequestions-wikidata", "wikidata", "dbpedia"):
        (tmp_path / folder).symlink_to(data_dir / folder)
    assert dbpedia.inputs_digest(tmp_path) == dbpedia_build.digest
    assert dbpedia.convert(tmp_path).resources == dbpedia_build.manifest["resources"]


def test_results_are_not_cut_at_virtuosos_default_10000_rows(virtuoso_server: VirtuosoServer,
                                                            dbpedia_build: dbpedia.DBpediaBuild) -> None:
    res = httpx.post(virtuoso_server.url, data={"query": "SELECT ?s WHERE { ?s a <http://www.w3.org/2002/07/owl#Thing> }"},
                     headers={"Accept": "application/sparql-results+json"}, timeout=60)
    assert "X-SPARQL-MaxRows" not in res.headers
    assert len(res.json()["results"]["bindings"]) == dbpedia_build.manifest["counts"]["resources"]


def test_forward_and_backward_facts_are_exactly_the_converted_data(dbpedia_kb: KifKnowledgeBase,
                                                                    expected: Expected,
                                                                    sample: list[Statement]) -> None:
    async def check() -> None:
        for s, p, o in sample:
            forward = await dbpedia_kb.facts(s, p, "forward")
            assert {(f.subject, f.property, f.value) for f in forward.facts} == \
                {x for x in expected.by_subject[s] if x[1] == p}
            backward = await dbpedia_kb.facts(o, p, "backward")
            assert {(f.subject, f.property, f.value) for f in backward.facts} == \
                {x for x in expected.by_value[o] if x[1] == p}
            assert all(f.value_type == "item" for f in forward.facts) and not forward.truncated
            fact = next(f for f in forward.facts if f.value == o)
            assert fact.subject_label and fact.value_label and fact.property_label
            assert "SELECT" in forward.sparql
    run(check())


def test_the_sparql_dbpedia_spec_on_this_machine_is_the_same_base(virtuoso_server: VirtuosoServer, settings: Settings,
                                                                 sample: list[Statement]) -> None:
    kb = open_kb(f"sparql+dbpedia:{virtuoso_server.url}", settings)
    try:
        info = endpoint_info(kb.store, kb.search)
        assert (info["store"], info["mapping"], info["search"]) == ("kifqa-virtuoso", "DBpediaMapping", "kifqa-dbpedia")
        s, p, o = sample[0]
        assert o in {f.value for f in run(kb.facts(s, p, "forward")).facts}
    finally:
        run(kb.aclose())


def test_properties_of_lists_both_directions(dbpedia_kb: KifKnowledgeBase, expected: Expected,
                                             sample: list[Statement]) -> None:
    async def check() -> None:
        for entity in {x for s, _, o in sample for x in (s, o)}:
            uses = (await dbpedia_kb.properties_of(entity)).uses
            got = [(u.property.id, u.direction) for u in uses]
            want = {(p, "forward") for _, p, _ in expected.by_subject[entity]}
            want |= {(p, "backward") for _, p, _ in expected.by_value[entity]}
            assert sorted(got) == sorted(want) and len(got) == len(want), entity
            assert all(u.property.label for u in uses)
    run(check())


def test_kif_filter_p_in_both_directions_and_filter(virtuoso_server: VirtuosoServer, expected: Expected,
                                                     sample: list[Statement]) -> None:
    store = VirtuosoStore("kifqa-virtuoso", virtuoso_server.url)
    try:
        s, p, o = sample[0]
        assert {x.iri.content for x in store.filter_p(subject=Item(s), property_mask=Filter.PropertyMask.REAL,
                                                      snak_mask=Filter.VALUE_SNAK)} == \
            {x[1] for x in expected.by_subject[s]}
        assert {x.iri.content for x in store.filter_p(value=Item(o), property_mask=Filter.PropertyMask.REAL,
                                                      snak_mask=Filter.VALUE_SNAK)} == \
            {x[1] for x in expected.by_value[o]}
        assert {x.iri.content for x in store.filter_s(property=Property(p), value=Item(o))} == \
            {x[0] for x in expected.by_value[o] if x[1] == p}
        birth = Property(DBO + "birthPlace")
        assert store.ask(subject=Item(s), property=Property(p), value=Item(o))  # Virtuoso's odd ASK results
        assert not store.ask(subject=Item(o), property=Property(p), value=Item(s))
        assert store.count(property=birth, snak_mask=Filter.VALUE_SNAK) == \
            sum(1 for x in expected.statements if x[1] == birth.iri.content)
    finally:
        store.close()


def test_kif_labels_descriptions_and_types_from_the_store(virtuoso_server: VirtuosoServer) -> None:
    # What the base offers KIF without kifqa's label index: rdfs:label/comment on resources and properties,
    # and the property path rdf:type/rdfs:subClassOf* of KIF's `wd.type`.
    store = VirtuosoStore("kifqa-virtuoso", virtuoso_server.url)
    try:
        sasha, birth = Item(DBR + "Sasha_Vujačić"), Property(DBO + "birthPlace")
        assert [v.content for v in store.filter_v(subject=sasha, property=wd.label, language="en")] == ["Sasha Vujačić"]
        assert "birth place" in {v.content for v in store.filter_v(subject=birth, property=wd.label, language="en")}
        assert store.filter_v(subject=birth, property=wd.description, language="en").__next__().content
        assert Item("http://www.w3.org/2002/07/owl#Thing") in set(store.filter_v(subject=sasha, property=wd.type))
        assert Item(DBO + "Animal") in set(store.filter_v(subject=Item(DBO + "Person"), property=wd.subtype))
    finally:
        store.close()


def test_iris_with_url_special_characters(dbpedia_kb: KifKnowledgeBase, expected: Expected) -> None:
    # `&`, `+`, `%` and non-ASCII letters in IRIs survive the form-encoded POST to Virtuoso.
    tricky = sorted(s for s in expected.by_subject if re.search(r"[&+%]", s))
    assert tricky
    async def check() -> None:
        for s in tricky[:5]:
            result = await dbpedia_kb.filter(subject=s)
            assert {(f.subject, f.property, f.value) for f in result.facts} == expected.by_subject[s]
    run(check())


def test_search_finds_resources_by_label_and_properties_by_label_or_comment(dbpedia_kb: KifKnowledgeBase) -> None:
    async def check() -> None:
        [first, *_] = await dbpedia_kb.search_entities("sasha vujacic")
        assert first.id == DBR + "Sasha_Vujačić" and first.label == "Sasha Vujačić"
        assert (await dbpedia_kb.search_properties("birth place"))[0].id == DBO + "birthPlace"
        by_comment = await dbpedia_kb.search_properties("where the person was born")
        assert DBO + "birthPlace" in [c.id for c in by_comment[:3]]
        assert (await dbpedia_kb.labels([DBO + "deathPlace", DBR + "Maribor"])) == \
            {DBO + "deathPlace": "death place", DBR + "Maribor": "Maribor"}
    run(check())


@pytest.fixture(scope="module")
def converted_questions(data_dir: Path, expected: Expected) -> list[tuple[dict, set[Statement]]]:
    """SimpleDBpediaQA questions with one DBpedia-ontology predicate whose facts were converted."""
    questions = json.loads((data_dir / paths.sdbqa("valid")).read_text(encoding="utf-8"))["Questions"]
    found = []
    for q in questions:
        [pred, *more] = q["PredicateList"]
        if more or pred["Constraint"]:
            continue
        index = expected.by_subject if pred["Direction"] == "forward" else expected.by_value
        facts = {x for x in index.get(q["Subject"], ()) if x[1] == pred["Predicate"]}
        if facts:
            found.append((q, facts))
    return found


def test_sdbqa_questions_whose_facts_were_converted(dbpedia_kb: KifKnowledgeBase,
                                                   converted_questions: list[tuple[dict, set[Statement]]]) -> None:
    assert len(converted_questions) > 300
    async def check() -> None:
        for q, facts in random.Random(3).sample(converted_questions, 20):
            pred = q["PredicateList"][0]
            got = await dbpedia_kb.facts(q["Subject"], pred["Predicate"], pred["Direction"])
            assert {(f.subject, f.property, f.value) for f in got.facts} == facts, q["Query"]
    run(check())


def Drafted(draft: str) -> ScriptedLLM:
    """A model that drafts a given triple pattern (the relation step needs no model when the draft names the
    property exactly)."""
    return ScriptedLLM(draft=draft, pick=draft, usage=Usage(prompt_tokens=10, completion_tokens=12), identity="drafted")


@pytest.mark.parametrize(("question", "draft", "answer"), [
    ("where was sasha vujačić born", "(sasha vujačić | birth place | ?x)", DBR + "Maribor"),
    ("in what french city did antoine de févin die", "(antoine de févin | death place | ?x)", None),
])
def test_pipeline_answers_from_the_dbpedia_base(dbpedia_kb: KifKnowledgeBase,
                                                expected: Expected, question: str, draft: str,
                                                answer: str | None) -> None:
    result = run(Pipeline(kb=dbpedia_kb, llm=Drafted(draft)).answer(Question("d", question)))
    assert result.trace.error is None, result.trace.error
    subject = result.trace.relations[0].entity
    want = {o for _, p, o in expected.by_subject[subject] if p == result.trace.relations[0].property}
    assert {a.answer for a in result.answers} == want and want
    if answer is not None:
        assert answer in want


def test_virtuoso_locks_its_sql_port_with_a_random_password_no_command_line_shows(tmp_path: Path, monkeypatch) -> None:
    """A base of two triples: its SQL port refuses the factory ``dba``/``dba`` login once loaded, and so does
    the password the database was created with (the one command line that carried one, before any port was
    open); no other process kifqa started carried a password (or any SQL) in its arguments, which ``ps``
    shows to every user."""
    import subprocess

    from kifqa.kb import virtuoso

    data = tmp_path / "tiny.nt"
    data.write_text('<http://x.org/a> <http://x.org/p> <http://x.org/b> .\n<http://x.org/b> <http://x.org/p> "c" .\n')
    started: list[list[str]] = []
    real_popen = subprocess.Popen

    def recording_popen(args, *rest, **kwargs):
        started.append([str(a) for a in args])
        return real_popen(args, *rest, **kwargs)

    monkeypatch.setattr(virtuoso.subprocess, "Popen", recording_popen)
    with VirtuosoServer(data, graph="http://x.org/g") as server:
        assert server.triples == 2
        assert server._run is not None
        sql_port = re.search(r"ServerPort = 127\.0\.0\.1:(\d+)", (server._run / "virtuoso.ini").read_text())[1]
        _, client = virtuoso.virtuoso_binaries()
        factory = real_popen([client, f"127.0.0.1:{sql_port}", "dba", "dba", "exec=SELECT 1;"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        output = factory.communicate(timeout=60)[0].decode(errors="replace")
        assert factory.returncode != 0 and "Bad login" in output, output
        assert "password" not in (server._run / "virtuoso.ini").read_text().lower()
        created, *_ = started
        first = created[created.index("+pwddba") + 1]  # the creation's, before any port: the loader replaced it
        used = real_popen([client, f"127.0.0.1:{sql_port}", "dba", first, "exec=SELECT 1;"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        output = used.communicate(timeout=60)[0].decode(errors="replace")
        assert used.returncode != 0 and "Bad login" in output, output
    assert len(started) == 3, started  # the database's creation, the server and the loader
    assert all(not any(w in arg.upper() for w in ("PASSWORD", "PWD", "SELECT", "LD_DIR"))
               for a in started[1:] for arg in a)


def test_virtuoso_refuses_the_factory_dba_login_from_the_moment_its_sql_port_accepts(tmp_path: Path) -> None:
    """The database is created with its password set before the server listens: ``dba``/``dba`` is refused
    at the first connection the SQL port accepts."""
    import socket
    import subprocess
    import threading
    import time

    from kifqa.kb import virtuoso

    data = tmp_path / "tiny.nt"
    data.write_text('<http://x.org/a> <http://x.org/p> <http://x.org/b> .\n')
    server = VirtuosoServer(data, graph="http://x.org/g")
    failed: list[BaseException] = []

    def start() -> None:
        try:
            server.start()
        except BaseException as e:  # reported below
            failed.append(e)

    starting = threading.Thread(target=start)
    starting.start()
    _, client = virtuoso.virtuoso_binaries()
    answers = []
    try:
        found = None
        while found is None:  # the configuration, once written whole
            time.sleep(0.005)
            ini = server._run / "virtuoso.ini" if server._run is not None else None
            found = re.search(r"ServerPort = 127\.0\.0\.1:(\d+)", ini.read_text()) if ini and ini.is_file() else None
        sql_port = int(found[1])
        while starting.is_alive():
            try:
                socket.create_connection(("127.0.0.1", sql_port), timeout=1).close()
            except OSError:
                time.sleep(0.005)
                continue
            factory = subprocess.run([client, f"127.0.0.1:{sql_port}", "dba", "dba", "exec=SELECT 1;"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     timeout=60)
            answers.append(factory.stdout.decode(errors="replace"))
            break  # once: Virtuoso holds back a user's logins after failed ones, the loader's too
        starting.join()
        assert not failed, failed
        assert answers, "the SQL port was never seen accepting while the server started"
        assert all("Bad login" in a for a in answers), answers
    finally:
        starting.join()
        server.stop()
