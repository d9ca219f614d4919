"""The field's query form of an answer's relations, and answers compared however a result spells them."""

from __future__ import annotations

import pytest

from kifqa.kb.fieldform import canonical, field_query, result_terms
from kifqa.types import Relation

WD = "PREFIX wd: <http://www.wikidata.org/entity/>\nPREFIX wdt: <http://www.wikidata.org/prop/direct/>\n"


def test_forward_and_backward_on_wikidata() -> None:
    assert field_query([Relation("Q5950", "P19", "forward")]) == \
        WD + "SELECT DISTINCT ?x WHERE { wd:Q5950 wdt:P19 ?x . }"
    assert field_query([Relation("Q43", "P19", "backward")]) == \
        WD + "SELECT DISTINCT ?x WHERE { ?x wdt:P19 wd:Q43 . }"


def test_namesakes_are_a_union_and_a_constraint_narrows_it() -> None:
    query = field_query([Relation("Q1", "P57", "backward"), Relation("Q2", "P57", "backward")],
                        [[Relation("Q11424", "P31", "backward")]])
    assert query == WD + ("SELECT DISTINCT ?x WHERE { { ?x wdt:P57 wd:Q1 . } UNION { ?x wdt:P57 wd:Q2 . } "
                          "{ ?x wdt:P31 wd:Q11424 . } }")


def test_dbpedia_iris_are_prefixed_where_the_field_writes_them_so() -> None:
    query = field_query([Relation("http://dbpedia.org/resource/James_Brown", "http://dbpedia.org/ontology/birthPlace",
                                  "forward")])
    assert query == ("PREFIX dbr: <http://dbpedia.org/resource/>\nPREFIX dbo: <http://dbpedia.org/ontology/>\n"
                     "SELECT DISTINCT ?x WHERE { dbr:James_Brown dbo:birthPlace ?x . }")
    # a local name a prefixed name cannot carry plainly stays a full IRI
    odd = field_query([Relation("http://dbpedia.org/resource/Clyde,_Missouri", "http://dbpedia.org/ontology/country",
                                "forward")])
    assert "<http://dbpedia.org/resource/Clyde,_Missouri> dbo:country ?x" in odd and "dbr:" not in odd


def test_an_id_no_query_can_carry_is_refused() -> None:
    with pytest.raises(ValueError):
        field_query([Relation("not an id", "P19", "forward")])
    with pytest.raises(ValueError):
        field_query([])


@pytest.mark.parametrize(("ours", "theirs"), [
    ("Q42", "http://www.wikidata.org/entity/Q42"),
    ("1689-12-01T00:00:00+00:00", "1689-12-01T00:00:00Z"),
    ("2.18", "+2.18"),
    ("12", "12.0"),
    ("https://example.org/alpha", "https://example.org/alpha"),
    ("HIP 71683", "HIP 71683"),
])
def test_answers_compare_however_they_are_spelt(ours: str, theirs: str) -> None:
    assert canonical(ours) == canonical(theirs)


def test_distinct_answers_stay_distinct() -> None:
    assert canonical("Q42") != canonical("Q43") and canonical("1689-12-01T00:00:00Z") != canonical("1689-12-02")
    result = {"head": {"vars": ["x"]}, "results": {"bindings": [
        {"x": {"type": "uri", "value": "http://www.wikidata.org/entity/Q1"}},
        {"x": {"type": "literal", "value": "+2.50", "datatype": "http://www.w3.org/2001/XMLSchema#decimal"}},
        {"y": {"type": "literal", "value": "unrelated"}}]}}
    assert result_terms(result) == {"Q1", "2.5"}
