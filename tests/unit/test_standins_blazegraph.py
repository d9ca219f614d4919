"""The WDQS-like front's rewrite of Blazegraph's dialect into standard SPARQL, checked by a standard parser
(pyoxigraph) and on data."""

from __future__ import annotations

import pyoxigraph
import pytest

from kifqa.bench.standins.blazegraph import is_blazegraph, to_standard
from kifqa.errors import KBError

NAMED = """SELECT DISTINCT * WITH {
  SELECT ?s ?o WHERE { ?s <http://ex.org/p> ?o . FILTER (?o != "}{") }
}
AS %Q
WHERE {
  INCLUDE %Q
  OPTIONAL { ?o <http://ex.org/q> ?x . }
}"""

SOME = 'SELECT ?s WHERE { ?s <http://ex.org/p> ?v . FILTER (!(<http://wikiba.se/ontology#isSomeValue>(?v))) }'


def _store() -> pyoxigraph.Store:
    store = pyoxigraph.Store()
    ex = "http://ex.org/"
    store.add(pyoxigraph.Quad(pyoxigraph.NamedNode(ex + "a"), pyoxigraph.NamedNode(ex + "p"),
                              pyoxigraph.NamedNode(ex + "b")))
    store.add(pyoxigraph.Quad(pyoxigraph.NamedNode(ex + "b"), pyoxigraph.NamedNode(ex + "q"),
                              pyoxigraph.Literal("x")))
    store.add(pyoxigraph.Quad(pyoxigraph.NamedNode(ex + "c"), pyoxigraph.NamedNode(ex + "p"),
                              pyoxigraph.NamedNode("http://www.wikidata.org/.well-known/genid/123")))
    return store


def test_named_subqueries_become_inline_subqueries() -> None:
    assert is_blazegraph(NAMED)
    with pytest.raises(SyntaxError):
        _store().query(NAMED)  # what a standard engine makes of it
    standard = to_standard(NAMED)
    assert "WITH" not in standard and "INCLUDE" not in standard and '"}{"' in standard
    rows = {(r["s"].value, r["x"].value if r["x"] else None) for r in _store().query(standard)}
    assert rows == {("http://ex.org/a", "x"), ("http://ex.org/c", None)}


def test_is_some_value_becomes_the_genid_test() -> None:
    assert is_blazegraph(SOME)
    rows = [r["s"].value for r in _store().query(to_standard(SOME))]
    assert rows == ["http://ex.org/a"]  # c's value is a some-value


def test_standard_sparql_is_left_alone() -> None:
    query = 'SELECT ?s WHERE { ?s <http://ex.org/p> "WITH { x } AS %Q" . }  # INCLUDE %Q'
    assert not is_blazegraph(query) and to_standard(query) == query


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT * WITH { SELECT ?s WHERE { ?s ?p ?o } WHERE { INCLUDE %Q }", "never closed"),
    ("SELECT * WITH { SELECT ?s WHERE { ?s ?p ?o } } WHERE { INCLUDE %Q }", "without `AS %name`"),
    ("SELECT * WHERE { INCLUDE %Q }", "INCLUDE %Q of a named subquery the query does not define"),
])
def test_unreadable_named_subqueries_are_errors(query: str, message: str) -> None:
    with pytest.raises(KBError, match=message):
        to_standard(query)
