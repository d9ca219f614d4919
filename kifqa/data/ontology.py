"""The DBpedia ontology (``dbpedia/ontology.ttl``): its graph, and the English names of its properties."""

from __future__ import annotations

import functools
from pathlib import Path

import rdflib
from rdflib.namespace import OWL, RDF, RDFS

from kifqa.data import paths
from kifqa.data.text import spaced
from kifqa.errors import DataError


def read_ontology(path: Path) -> rdflib.Graph:
    """The ontology's graph, plus ``a rdf:Property`` on each of its object and datatype properties (what KIF's
    DBpedia mapping asks)."""
    graph = rdflib.Graph()
    try:
        graph.parse(path, format="turtle")
    except Exception as err:
        raise DataError(f"{path} is not valid Turtle: {err}") from err
    for kind in (OWL.ObjectProperty, OWL.DatatypeProperty):
        for p in graph.subjects(RDF.type, kind):
            graph.add((p, RDF.type, RDF.Property))
    return graph


def english(graph: rdflib.Graph, subject: rdflib.term.Node, predicate: rdflib.URIRef) -> str:
    """``subject``'s English (else untagged) ``predicate`` text, spaces folded; empty where it has none."""
    texts = [o for o in graph.objects(subject, predicate) if isinstance(o, rdflib.Literal)]
    best = [o for o in texts if o.language == "en"] or [o for o in texts if not o.language]
    return spaced(str(min(best))) if best else ""


@functools.cache
def property_labels(data_dir: Path) -> dict[str, str]:
    """Property IRI → its English label, for the ontology's properties that have one (read once a process)."""
    graph = read_ontology(Path(data_dir) / paths.ONTOLOGY)
    found = {str(p): english(graph, p, RDFS.label) for p in set(graph.subjects(RDF.type, RDF.Property))}
    return {iri: label for iri, label in found.items() if label}
