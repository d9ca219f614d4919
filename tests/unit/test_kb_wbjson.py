"""A ``wbgetentities`` entity read as the SPARQL path reads the same statements: KIF values, best rank, value
snaks only."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kif_lib import IRI, ExternalId, Item, ItemDatatype, Quantity, String, Text, Time

from kifqa.kb.wbjson import read_entity

WD = "http://www.wikidata.org/entity/"


def _claim(prop: str, datatype: str, datavalue: dict[str, Any] | None, *, rank: str = "normal",
           snaktype: str = "value") -> dict[str, Any]:
    snak: dict[str, Any] = {"snaktype": snaktype, "property": prop, "datatype": datatype}
    if datavalue is not None:
        snak["datavalue"] = datavalue
    return {"mainsnak": snak, "type": "statement", "id": f"Q1${prop}", "rank": rank}


def test_values_ranks_and_snaks_as_kif_reads_them_from_sparql() -> None:
    item = lambda id: {"value": {"entity-type": "item", "numeric-id": int(id[1:]), "id": id},  # noqa: E731
                       "type": "wikibase-entityid"}
    claims = {
        "P31": [_claim("P31", "wikibase-item", item("Q5"), rank="preferred"), _claim("P31", "wikibase-item", item("Q6"))],
        "P27": [_claim("P27", "wikibase-item", item("Q30"), rank="deprecated"),
                _claim("P27", "wikibase-item", item("Q31"))],
        "P19": [_claim("P19", "wikibase-item", None, snaktype="somevalue")],
        "P569": [_claim("P569", "time", {"value": {"time": "+1952-03-00T00:00:00Z", "precision": 10, "timezone": 0,
                                                   "calendarmodel": WD + "Q1985727"}, "type": "time"})],
        "P2048": [_claim("P2048", "quantity", {"value": {"amount": "+1.80", "unit": WD + "Q11573"},
                                               "type": "quantity"}),
                  _claim("P2048", "quantity", {"value": {"amount": "-3", "unit": "1"}, "type": "quantity"})],
        "P214": [_claim("P214", "external-id", {"value": "113230702", "type": "string"})],
        "P856": [_claim("P856", "url", {"value": "https://example.org/", "type": "string"})],
        "P1448": [_claim("P1448", "monolingualtext", {"value": {"text": "Douglas", "language": "en"},
                                                      "type": "monolingualtext"})],
        "P373": [_claim("P373", "string", {"value": "Douglas Adams", "type": "string"})],
    }
    entity = read_entity({"type": "item", "id": "Q1", "labels": {"en": {"language": "en", "value": "One"}},
                          "aliases": {"en": [{"language": "en", "value": "1"}]}, "claims": claims}, claims=True)
    assert entity is not None and entity.label == "One" and entity.aliases == ("1",) and entity.description == ""
    rows = {(r.property.removeprefix(WD), r.value) for r in entity.statements or ()}
    assert rows == {
        ("P31", WD + "Q5"),  # the preferred statement only
        ("P27", WD + "Q31"),  # never the deprecated one
        ("P569", Time("1952-03-01T00:00:00Z")),
        ("P2048", Quantity(Decimal("1.80"), Item(WD + "Q11573"))), ("P2048", Quantity(Decimal("-3"))),
        ("P214", ExternalId("113230702")), ("P856", IRI("https://example.org/")),
        ("P1448", Text("Douglas", "en")), ("P373", String("Douglas Adams")),
    }
    assert next(r for r in entity.statements or () if r.property == WD + "P31").datatype == ItemDatatype()


def test_a_missing_entity_and_terms_without_claims() -> None:
    assert read_entity({"id": "Q404", "missing": ""}, claims=True) is None
    prop = read_entity({"type": "property", "id": "P19", "datatype": "wikibase-item", "labels": {}}, claims=False)
    assert prop is not None and prop.datatype == "wikibase-item" and prop.statements is None and prop.label == ""
