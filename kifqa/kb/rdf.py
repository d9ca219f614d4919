"""The dataset as Wikibase-dump-shaped RDF (N-Triples), the shape KIF's Wikidata mapping queries.

Per item: ``a wikibase:Item``, ``wikibase:sitelinks``, ``rdfs:label``, ``skos:altLabel``. Per property
that some statement uses (the others are only in the label index: each extra property slows down
Oxigraph's joins on unbound properties several-fold):
``a wikibase:Property``, ``wikibase:propertyType`` and the ``claim``/``directClaim``/``statementProperty``/
``statementValue``/``qualifier``/``qualifierValue``/``reference``/``referenceValue``/``novalue`` links,
label, aliases, ``schema:description``. Per statement: ``wdt:`` truthy triple, ``p:`` statement node with
``ps:`` value, ``wikibase:rank wikibase:NormalRank`` and ``a wikibase:BestRank``; quantities and times
also get a ``psv:`` value node.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal, InvalidOperation

from kifqa.data.ids import WD
from kifqa.data.paths import TRIPLES
from kifqa.data.wikidata import WIKIBASE_TYPES, Dataset, Triple
from kifqa.errors import DataError

WIKIDATA = "http://www.wikidata.org/"
WDS = WD + "statement/"
WDV = WIKIDATA + "value/"
P = WIKIDATA + "prop/"
WIKIBASE = "http://wikiba.se/ontology#"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
RDFS_LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"
SKOS_ALT_LABEL = "<http://www.w3.org/2004/02/skos/core#altLabel>"
SCHEMA_DESCRIPTION = "<http://schema.org/description>"
XSD = "http://www.w3.org/2001/XMLSchema#"

#: Property-schema predicates: ``wikibase:`` link -> namespace under ``prop/``.
_SCHEMA = {
    "claim": "",
    "directClaim": "direct/",
    "statementProperty": "statement/",
    "statementValue": "statement/value/",
    "qualifier": "qualifier/",
    "qualifierValue": "qualifier/value/",
    "reference": "reference/",
    "referenceValue": "reference/value/",
    "novalue": "novalue/",
}

#: Datatypes whose values are plain string literals (KIF reads unknown ones as strings).
_STRING_TYPES = {"string", "external-id", "commonsMedia", "math", "musical-notation", "geo-shape",
                 "tabular-data", "entity-schema"}
_ITEM_ID = re.compile(r"Q[1-9][0-9]*")
_PROPERTY_ID = re.compile(r"P[1-9][0-9]*")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|\\^`]+")
_TIME = re.compile(r"([+-]?)(\d{1,16})(?:-(\d\d)(?:-(\d\d))?)?(?:T00:00:00Z)?")
_UNITLESS = f"<{WD}Q199>"
_GREGORIAN = f"<{WD}Q1985727>"


def _iri(iri: str) -> str:
    return f"<{iri}>"


def _wb(name: str) -> str:
    return f"<{WIKIBASE}{name}>"


def _text(text: str) -> str:
    return json.dumps(text, ensure_ascii=False) + "@en"


def _typed(lexical: str, xsd_type: str) -> str:
    return f'{json.dumps(lexical)}^^<{XSD}{xsd_type}>'


def _triple(s: str, p: str, o: str) -> str:
    return f"{s} {p} {o} .\n"


def lines(data: Dataset) -> Iterator[str]:
    """The N-Triples lines of the whole knowledge base."""
    sitelinks = _typed("0", "integer")
    linked = {t.subject for t in data.triples if _ITEM_ID.fullmatch(t.subject)}
    linked.update(t.value for t in data.triples if data.properties[t.property].datatype == "wikibase-item")
    for id in sorted(linked | data.items.keys()):
        item = _iri(WD + id)
        yield _triple(item, RDF_TYPE, _wb("Item"))
        yield _triple(item, _wb("sitelinks"), sitelinks)
        if record := data.items.get(id):
            yield from _names(item, record.label, record.aliases)
    used = {t.property for t in data.triples}
    used.update(t.value for t in data.triples if data.properties[t.property].datatype == "wikibase-property")
    for prop in (data.properties[id] for id in sorted(used & data.properties.keys())):
        node = _iri(WD + prop.id)
        yield _triple(node, RDF_TYPE, _wb("Property"))
        yield _triple(node, _wb("propertyType"), _wb(WIKIBASE_TYPES[prop.datatype]))
        for link, ns in _SCHEMA.items():
            yield _triple(node, _wb(link), _iri(P + ns + prop.id))
        yield from _names(node, prop.label, prop.aliases)
        if prop.description:
            yield _triple(node, SCHEMA_DESCRIPTION, _text(prop.description))
    for triple in data.triples:
        yield from _statement(triple, data.properties[triple.property].datatype)


def _names(node: str, label: str, aliases: Iterable[str]) -> Iterator[str]:
    if label:
        yield _triple(node, RDFS_LABEL, _text(label))
    for alias in aliases:
        yield _triple(node, SKOS_ALT_LABEL, _text(alias))


def _statement(t: Triple, datatype: str) -> Iterator[str]:
    key = hashlib.sha1(f"{t.subject}\t{t.property}\t{t.value}".encode()).hexdigest()[:20]
    wds = _iri(f"{WDS}{t.subject}-{key}")
    value, value_node = _value(t, datatype, key)
    yield _triple(_iri(WD + t.subject), _iri(P + "direct/" + t.property), value)
    yield _triple(_iri(WD + t.subject), _iri(P + t.property), wds)
    yield _triple(wds, _iri(P + "statement/" + t.property), value)
    yield _triple(wds, _wb("rank"), _wb("NormalRank"))
    yield _triple(wds, RDF_TYPE, _wb("BestRank"))
    if value_node:
        node = _iri(WDV + key)
        yield _triple(wds, _iri(P + "statement/value/" + t.property), node)
        yield from (_triple(node, p, o) for p, o in value_node)


def _value(t: Triple, datatype: str, key: str) -> tuple[str, list[tuple[str, str]]]:
    """The ``ps:`` object of a statement and the (predicate, object) pairs of its value node."""
    v = t.value
    if datatype == "wikibase-item" and _ITEM_ID.fullmatch(v):
        return _iri(WD + v), []
    if datatype == "wikibase-property" and _PROPERTY_ID.fullmatch(v):
        return _iri(WD + v), []
    if datatype in _STRING_TYPES and v:
        return json.dumps(v, ensure_ascii=False), []
    if datatype == "url" and _URL.fullmatch(v):
        return _iri(v), []
    if datatype == "quantity":
        try:
            number = Decimal(v)
        except InvalidOperation:
            number = Decimal("NaN")
        if number.is_finite():
            amount = _typed(f"{number:+}", "decimal")
            return amount, [(RDF_TYPE, _wb("QuantityValue")), (_wb("quantityAmount"), amount),
                            (_wb("quantityUnit"), _UNITLESS)]
    if datatype == "time" and (m := _TIME.fullmatch(v)):
        sign, year, month, day = m.groups()
        precision = 11 if day else 10 if month else 9
        time = _typed(f"{'-' if sign == '-' else ''}{year.zfill(4)}-{month or '01'}-{day or '01'}T00:00:00Z",
                      "dateTime")
        return time, [(RDF_TYPE, _wb("TimeValue")), (_wb("timeValue"), time),
                      (_wb("timePrecision"), _typed(str(precision), "integer")),
                      (_wb("timeTimezone"), _typed("0", "integer")), (_wb("timeCalendarModel"), _GREGORIAN)]
    raise DataError(f"{TRIPLES}:{t.line}: value {v!r} does not fit property {t.property} of datatype {datatype}")
