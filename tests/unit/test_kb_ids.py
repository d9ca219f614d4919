"""Compact ids <-> KIF entities."""

from __future__ import annotations

import pytest
from kif_lib import IRI, Item, Lexeme, Property

from kifqa.errors import KBError
from kifqa.kb import ids


def test_wikidata_iris_become_compact_ids() -> None:
    assert ids.to_id(Item("http://www.wikidata.org/entity/Q42")) == "Q42"
    assert ids.to_id(Property("http://www.wikidata.org/entity/P19")) == "P19"
    assert ids.to_id(IRI("http://www.wikidata.org/entity/L7")) == "L7"
    assert ids.to_id("http://www.wikidata.org/entity/statement/Q1-x") == "http://www.wikidata.org/entity/statement/Q1-x"


def test_other_iris_stay_full() -> None:
    iri = "http://dbpedia.org/resource/Paris"
    assert ids.to_id(Item(iri)) == iri
    assert ids.to_iri(iri) == iri


def test_entities_by_kind() -> None:
    assert ids.entity("Q42") == Item("http://www.wikidata.org/entity/Q42")
    assert ids.entity("P19") == Property("http://www.wikidata.org/entity/P19")
    assert ids.entity("L7") == Lexeme("http://www.wikidata.org/entity/L7")
    assert ids.entity("http://dbpedia.org/resource/Paris") == Item("http://dbpedia.org/resource/Paris")
    birth_place = "http://dbpedia.org/ontology/birthPlace"
    assert ids.property(birth_place) == Property(birth_place)


@pytest.mark.parametrize("bad", ["", "Q", "Q0", "42", "james brown", "Q42 x"])
def test_bad_ids_are_kb_errors(bad: str) -> None:
    with pytest.raises(KBError, match="not an entity id"):
        ids.to_iri(bad)


@pytest.mark.parametrize("bad", ['http://x.org/"a"', "http://x.org/a>b", "http://x.org/{a}", "http://x.org/a|b",
                                 "http://x.org/a^b", "http://x.org/a`b", "http://x.org/a\\b", "http://x.org/a\x01b",
                                 "http://x.org/a\x7fb", "http://x.org/a<b"])
def test_iris_sparql_cannot_carry_are_not_ids(bad: str) -> None:
    with pytest.raises(KBError, match="not an entity id"):
        ids.to_iri(bad)
