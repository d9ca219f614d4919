"""The DBpedia ontology's property labels, read with Oxigraph's parser: the labels rdflib's graph of the same file
gives (:func:`~kifqa.data.ontology.read_ontology`, which the DBpedia build maps with), and a clear error for a
broken file."""

from __future__ import annotations

from pathlib import Path

import pytest
from rdflib.namespace import RDF, RDFS

from kifqa.data import ontology, paths
from kifqa.errors import DataError


def test_the_labels_are_those_of_the_ontologys_graph(data_dir: Path) -> None:
    graph = ontology.read_ontology(data_dir / paths.ONTOLOGY)
    expected = {str(p): ontology.english(graph, p, RDFS.label) for p in set(graph.subjects(RDF.type, RDF.Property))}
    labels = ontology.property_labels(data_dir)
    assert labels == {iri: label for iri, label in expected.items() if label} and len(labels) > 1000
    assert labels["http://dbpedia.org/ontology/birthPlace"] == "birth place"


def test_a_broken_ontology_is_a_data_error(tmp_path: Path) -> None:
    (tmp_path / paths.ONTOLOGY).parent.mkdir(parents=True)
    (tmp_path / paths.ONTOLOGY).write_text("<http://dbpedia.org/ontology/p> a <")
    with pytest.raises(DataError, match="is not valid Turtle"):
        ontology.property_labels(tmp_path)
