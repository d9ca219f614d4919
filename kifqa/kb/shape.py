"""Which data model a KB spec's base follows: Wikidata's (items and ``Pn`` properties with Wikidata's labels) or
DBpedia's (resources named as Wikipedia titles, ontology properties), read from the spec alone."""

from __future__ import annotations

from typing import Literal

Shape = Literal["wikidata", "dbpedia", "other"]

_WIKIDATA = frozenset({"local", "local-hard", "local-server", "local-hard-server", "wikidata", "sparql+wikidata"})
_DBPEDIA = frozenset({"local-dbpedia", "local-dbpedia-server", "dbpedia", "sparql+dbpedia"})


def shape(spec: str) -> Shape:
    """The data model of the base ``spec`` names (:mod:`kifqa.kb.spec`'s forms); ``other`` for a KIF store
    (``kif:``), whose model the spec does not say."""
    head = spec.strip().partition(":")[0]
    return "wikidata" if head in _WIKIDATA else "dbpedia" if head in _DBPEDIA else "other"
