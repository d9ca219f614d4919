"""An answer's query in the form KBQA datasets carry, and the terms a SPARQL result gives, compared as kifqa's answers.

KIF compiles a filter to SPARQL with blank nodes and its mapping's statement nodes, one query per relation.
Datasets such as SimpleQuestions-Wikidata, LC-QuAD 2.0 and the sets mined from query logs carry instead one
``SELECT`` over the base's truthy triples: ``SELECT DISTINCT ?x WHERE { wd:Q5950 wdt:P19 ?x . }`` on Wikidata
(``wdt:`` is the best-ranked value, as KIF's filters return), ``dbr:James_Brown dbo:birthPlace ?x`` on DBpedia.
:func:`field_query` writes that form for the relations an answer came from, with its constraints;
:func:`result_terms` reads the answers back from a SPARQL JSON result as kifqa writes answers, so that
re-executing a query can be checked against the answers it was written for (:mod:`kifqa.eval.reexecute`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from kifqa.data.ids import compact, expand, is_wikidata_id
from kifqa.types import Relation

#: The variable a field-form query selects.
ANSWER = "x"

#: Prefixes a field-form query may use, by the namespace they abbreviate.
PREFIXES: Mapping[str, str] = {
    "wd": "http://www.wikidata.org/entity/",
    "wdt": "http://www.wikidata.org/prop/direct/",
    "dbr": "http://dbpedia.org/resource/",
    "dbo": "http://dbpedia.org/ontology/",
    "dbp": "http://dbpedia.org/property/",
}

#: A local name a prefixed name can carry without escapes (SPARQL's ``PN_LOCAL``, conservatively).
_PLAIN_LOCAL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


def _term(id: str, *, property: bool) -> str:
    """``id`` (a compact Wikidata id or a full IRI) as a SPARQL term, prefixed where the field writes it so."""
    if is_wikidata_id(id):
        return f"{'wdt' if property else 'wd'}:{id}"
    iri = expand(id)
    if iri is None:
        raise ValueError(f"{id!r} is neither a Wikidata id nor an IRI a query can carry")
    for prefix, namespace in PREFIXES.items():
        local = iri[len(namespace):]
        if iri.startswith(namespace) and _PLAIN_LOCAL.fullmatch(local) and prefix not in ("wd", "wdt"):
            return f"{prefix}:{local}"
    return f"<{iri}>"


def _triple(r: Relation) -> str:
    entity, prop = _term(r.entity, property=False), _term(r.property, property=True)
    return f"{entity} {prop} ?{ANSWER} ." if r.direction == "forward" else f"?{ANSWER} {prop} {entity} ."


def _union(relations: Sequence[Relation]) -> str:
    if len(relations) == 1:
        return _triple(relations[0])
    return " UNION ".join(f"{{ {_triple(r)} }}" for r in relations)


def field_query(relations: Sequence[Relation], constraints: Sequence[Sequence[Relation]] = ()) -> str:
    """The ``SELECT DISTINCT ?x`` that gives the answers of ``relations`` (their union), each of ``constraints``
    (a union of relations whose value ``?x`` must be: each constraint's relations read backward, ``?x p e``)
    narrowing them, with the prefixes it uses declared.

    Raises:
        ValueError: no relation, or an id no query can carry.
    """
    if not relations:
        raise ValueError("a field-form query needs at least one relation")
    groups = [_union(relations), *(_union(c) for c in constraints if c)]
    body = " ".join(groups if len(groups) == 1 else [g if g.startswith("{") else f"{{ {g} }}" for g in groups])
    used = [p for p, ns in PREFIXES.items() if re.search(rf"(?<![\w<]){p}:", body)]
    head = "".join(f"PREFIX {p}: <{PREFIXES[p]}>\n" for p in used)
    return f"{head}SELECT DISTINCT ?{ANSWER} WHERE {{ {body} }}"


def canonical(value: str) -> str:
    """One spelling of an answer, whether kifqa wrote it (``Q42``, ``1689-12-01T00:00:00+00:00``, ``2.18``) or a
    SPARQL result did (the entity's IRI, ``1689-12-01T00:00:00Z``, ``+2.18``): ids compact, times as UTC ISO
    instants, decimals normalised. Applied to both sides of a comparison, so a string that merely looks like a
    number or a date compares the same way on each."""
    text = compact(value.strip())
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        pass
    else:
        return moment.isoformat()
    try:
        number = Decimal(text)
    except InvalidOperation:
        return text
    return format(number.normalize(), "f") if number.is_finite() else text


def result_terms(result: Mapping[str, Any], variable: str = ANSWER) -> frozenset[str]:
    """The :func:`canonical` values ``variable`` takes in a SPARQL JSON ``SELECT`` result."""
    bindings = result.get("results", {}).get("bindings", [])
    return frozenset(canonical(str(b[variable]["value"])) for b in bindings if variable in b)
