"""A Wikidata API entity (``wbgetentities``' JSON) read into :class:`WikibaseEntity`: its English terms, a property's
datatype, and its statements as the SPARQL path reads them (:class:`~kifqa.kb.sparql.Row`, KIF values).

Only what a KIF filter of the pipeline's shape selects is kept: value snaks (not ``somevalue``/``novalue``) of the
best rank (the preferred statements of a property where it has any, else its normal ones; never deprecated ones),
as KIF's Wikidata mapping selects ``wikibase:BestRank`` statements.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from kif_lib import (
    IRI,
    Datatype,
    ExternalId,
    Item,
    ItemDatatype,
    LexemeDatatype,
    PropertyDatatype,
    Quantity,
    String,
    StringDatatype,
    Text,
    Time,
)
from kif_lib.model import Value

from kifqa.data.ids import WD
from kifqa.kb.sparql import Row

#: The KIF datatype of an entity value of each ``entity-type``.
_ENTITY_DATATYPES = {"item": ItemDatatype(), "property": PropertyDatatype(), "lexeme": LexemeDatatype()}
#: A quantity without a unit (the API writes ``"1"``).
_UNITLESS = "1"


@dataclass(frozen=True)
class WikibaseEntity:
    """One entity of a ``wbgetentities`` answer."""

    id: str
    label: str
    aliases: tuple[str, ...]
    description: str
    #: A property's Wikidata datatype (``wikibase-item``, ``time``...); ``""`` for an item.
    datatype: str
    #: Its best-ranked value statements; ``None`` when its claims were not asked.
    statements: tuple[Row, ...] | None


def read_entity(data: dict[str, Any], *, claims: bool) -> WikibaseEntity | None:
    """The entity of one ``entities`` member (``claims``: whether they were asked); ``None`` for a missing one."""
    if "missing" in data or not isinstance(data.get("id"), str):
        return None
    id = data["id"]
    label = data.get("labels", {}).get("en", {}).get("value", "")
    description = data.get("descriptions", {}).get("en", {}).get("value", "")
    aliases = tuple(a["value"] for a in data.get("aliases", {}).get("en", ()) if isinstance(a, dict) and "value" in a)
    statements = _statements(WD + id, data.get("claims", {})) if claims else None
    return WikibaseEntity(id=id, label=label, aliases=aliases, description=description,
                          datatype=str(data.get("datatype", "")), statements=statements)


def _statements(subject: str, claims: dict[str, list[dict[str, Any]]]) -> tuple[Row, ...]:
    rows: list[Row] = []
    for prop, group in claims.items():
        ranked = [c for c in group if isinstance(c, dict) and c.get("rank") in ("preferred", "normal")]
        best = [c for c in ranked if c["rank"] == "preferred"] or ranked
        for claim in best:
            if (row := _row(subject, WD + prop, claim.get("mainsnak", {}))) is not None:
                rows.append(row)
    return tuple(rows)


def _row(subject: str, prop: str, snak: dict[str, Any]) -> Row | None:
    """The row of a value snak (``None`` for another snak, or a value of a type KIF does not read)."""
    if snak.get("snaktype") != "value" or not isinstance(snak.get("datavalue"), dict):
        return None
    datatype, data = str(snak.get("datatype", "")), snak["datavalue"]
    kind, value = data.get("type"), data.get("value")
    if kind == "wikibase-entityid" and isinstance(value, dict):
        entity_type = _ENTITY_DATATYPES.get(value.get("entity-type", ""))
        return Row(subject, prop, entity_type, WD + value["id"]) if entity_type is not None and "id" in value else None
    literal = _literal(datatype, kind, value)
    return None if literal is None else Row(subject, prop, _datatype(datatype), literal)


def _literal(datatype: str, kind: Any, value: Any) -> Value | None:
    """The KIF value of a literal ``datavalue``, as KIF reads the same value from SPARQL."""
    try:
        if kind == "string" and isinstance(value, str):
            kinds = {"external-id": ExternalId, "url": IRI}
            return kinds.get(datatype, String)(value)
        if kind == "monolingualtext":
            return Text(value["text"], value["language"])
        if kind == "quantity":
            unit = value.get("unit", _UNITLESS)
            return Quantity(Decimal(value["amount"]), None if unit == _UNITLESS else Item(unit))
        if kind == "time":
            return Time(_xsd_time(value["time"]))
    except (KeyError, TypeError, ValueError, InvalidOperation):
        return None
    return None


def _xsd_time(api: str) -> str:
    """An API time (``+1952-00-00T00:00:00Z`` at year precision) as the ``xsd:dateTime`` WDQS gives for it."""
    sign = "-" if api.startswith("-") else ""
    date, _, rest = api.lstrip("+-").partition("T")
    year, month, day = date.split("-")
    return f"{sign}{year}-{month if month != '00' else '01'}-{day if day != '00' else '01'}T{rest}"


def _datatype(name: str) -> Datatype:
    """KIF's datatype of a Wikidata datatype (a string for those KIF does not model)."""
    try:
        return Datatype.check(name)
    except Exception:  # noqa: BLE001 - KIF reads the types it does not model as strings
        return StringDatatype()
