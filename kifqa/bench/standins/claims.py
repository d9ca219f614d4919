"""The statements of a build's entities in the Wikidata API's JSON shape (``wbgetentities``' ``claims``), read from
the SPARQL endpoint that serves the build (its Wikibase-dump-shaped RDF, :mod:`kifqa.kb.rdf`).

Each claim is what the real API gives: ``mainsnak`` (``snaktype``, ``property``, ``datavalue`` of the value's JSON
type, ``datatype``), ``type: statement``, an ``id`` and a ``rank`` (``preferred``, ``normal`` or ``deprecated``).
Times are written as the API writes them (``+1952-03-00T00:00:00Z`` at month precision), quantities with the
API's unit ``"1"`` for no unit.
"""

from __future__ import annotations

from typing import Any

import httpx

from kifqa.data.ids import WD
from kifqa.data.wikidata import WIKIBASE_TYPES

WIKIBASE = "http://wikiba.se/ontology#"
#: The Wikidata datatype of each ``wikibase:propertyType`` local name.
_DATATYPES = {local: name for name, local in WIKIBASE_TYPES.items()}
_RANKS = {f"{WIKIBASE}PreferredRank": "preferred", f"{WIKIBASE}NormalRank": "normal",
          f"{WIKIBASE}DeprecatedRank": "deprecated"}
_UNITLESS = f"{WD}Q199"

_QUERY = """PREFIX wikibase: <http://wikiba.se/ontology#>
SELECT ?s ?st ?prop ?type ?v ?rank ?unit ?precision WHERE {
  VALUES ?s { %s }
  ?s ?claim ?st .
  ?prop wikibase:claim ?claim ; wikibase:statementProperty ?ps ; wikibase:propertyType ?type .
  ?st ?ps ?v ; wikibase:rank ?rank .
  OPTIONAL { ?prop wikibase:statementValue ?psv . ?st ?psv ?node .
             OPTIONAL { ?node wikibase:quantityUnit ?unit } OPTIONAL { ?node wikibase:timePrecision ?precision } }
}"""


class Claims:
    """Reads the claims of entities from ``sparql_url`` (a SPARQL endpoint over a Wikidata-shaped build)."""

    def __init__(self, sparql_url: str, *, timeout_s: float = 60.0) -> None:
        self.url = sparql_url
        self._http = httpx.Client(timeout=timeout_s)

    def of(self, ids: list[str]) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """The ``claims`` of each of ``ids`` (by property id, in the build's order), ``{}`` for one without."""
        out: dict[str, dict[str, list[dict[str, Any]]]] = {id: {} for id in ids}
        if not ids:
            return out
        values = " ".join(f"<{WD}{id}>" for id in ids)
        response = self._http.post(self.url, content=(_QUERY % values).encode(),
                                   headers={"Content-Type": "application/sparql-query",
                                            "Accept": "application/sparql-results+json"})
        response.raise_for_status()
        for row in response.json()["results"]["bindings"]:
            subject = row["s"]["value"].removeprefix(WD)
            prop = row["prop"]["value"].removeprefix(WD)
            datatype = _DATATYPES.get(row["type"]["value"].removeprefix(WIKIBASE), "string")
            claim = {"mainsnak": {"snaktype": "value", "property": prop, "datavalue": _datavalue(row, datatype),
                                  "datatype": datatype},
                     "type": "statement", "id": row["st"]["value"].rpartition("/")[2],
                     "rank": _RANKS.get(row["rank"]["value"], "normal")}
            out[subject].setdefault(prop, []).append(claim)
        return out

    def close(self) -> None:
        self._http.close()


def _datavalue(row: dict[str, Any], datatype: str) -> dict[str, Any]:
    """A statement value's ``datavalue`` as the API writes it for ``datatype``."""
    v = row["v"]
    if datatype in ("wikibase-item", "wikibase-property", "wikibase-lexeme"):
        id = v["value"].removeprefix(WD)
        return {"value": {"entity-type": datatype.removeprefix("wikibase-"), "numeric-id": int(id[1:]), "id": id},
                "type": "wikibase-entityid"}
    if datatype == "monolingualtext":
        return {"value": {"text": v["value"], "language": v.get("xml:lang", "en")}, "type": "monolingualtext"}
    if datatype == "quantity":
        unit = row.get("unit", {}).get("value", _UNITLESS)
        amount = v["value"] if v["value"].startswith(("+", "-")) else "+" + v["value"]
        return {"value": {"amount": amount, "unit": "1" if unit == _UNITLESS else unit}, "type": "quantity"}
    if datatype == "time":
        precision = int(row.get("precision", {}).get("value", 11))
        return {"value": {"time": _api_time(v["value"], precision), "timezone": 0, "before": 0, "after": 0,
                          "precision": precision, "calendarmodel": f"{WD}Q1985727"}, "type": "time"}
    return {"value": v["value"], "type": "string"}


def _api_time(xsd: str, precision: int) -> str:
    """An ``xsd:dateTime`` as the API writes a time of ``precision`` (9 year, 10 month, 11 day)."""
    sign = "-" if xsd.startswith("-") else "+"
    date = xsd.lstrip("+-").partition("T")[0]
    year, month, day = date.split("-")
    month = month if precision >= 10 else "00"
    day = day if precision >= 11 else "00"
    return f"{sign}{year}-{month}-{day}T00:00:00Z"

