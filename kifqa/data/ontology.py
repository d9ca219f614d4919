"""The DBpedia ontology (``dbpedia/ontology.ttl``): its graph, and the English names of its properties."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pyoxigraph
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
    return _english((o.language, str(o)) for o in graph.objects(subject, predicate) if isinstance(o, rdflib.Literal))


def _english(texts: Iterable[tuple[str | None, str]]) -> str:
    """The first in order of the English texts of (language tag, text) pairs, else of the untagged ones, spaces
    folded; empty where there is neither."""
    tagged = list(texts)
    best = [text for language, text in tagged if language == "en"] or [
        text for language, text in tagged if not language]
    return spaced(min(best)) if best else ""


#: The types that make a subject one of the ontology's properties (:func:`read_ontology`'s ``rdf:Property``).
_PROPERTY_TYPES = frozenset(str(t) for t in (OWL.ObjectProperty, OWL.DatatypeProperty, RDF.Property))
_TYPE, _LABEL = str(RDF.type), str(RDFS.label)


@functools.cache
def property_labels(data_dir: Path) -> dict[str, str]:
    """Property IRI → its English label (as :func:`english` chooses it), for the ontology's properties that have one
    (read once a process). Oxigraph's parser reads the file in about a tenth of rdflib's time: every process that
    answers SimpleDBpediaQA drafts (the gold model's actors, the DBpedia pools) reads it."""
    path = Path(data_dir) / paths.ONTOLOGY
    properties: set[str] = set()
    labels: defaultdict[str, list[tuple[str | None, str]]] = defaultdict(list)
    try:
        for triple in pyoxigraph.parse(path=path, format=pyoxigraph.RdfFormat.TURTLE):
            subject, predicate, value = triple.subject, triple.predicate.value, triple.object
            if not isinstance(subject, pyoxigraph.NamedNode):
                continue
            if predicate == _TYPE and isinstance(value, pyoxigraph.NamedNode) and value.value in _PROPERTY_TYPES:
                properties.add(subject.value)
            elif predicate == _LABEL and isinstance(value, pyoxigraph.Literal):
                labels[subject.value].append((value.language, value.value))
    except (SyntaxError, OSError) as err:
        raise DataError(f"{path} is not valid Turtle: {err}") from err
    found = {iri: _english(labels[iri]) for iri in properties}
    return {iri: label for iri, label in found.items() if label}
