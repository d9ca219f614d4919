"""The any-word search of a Virtuoso endpoint (public DBpedia's): resources whose English ``rdfs:label`` holds any
uncommon word of a text, through Virtuoso's free-text index (``bif:contains``), ranked as the label index ranks its
own last tier (:func:`~kifqa.kb.index.any_words_share`, then Virtuoso's text score).

Two queries a text, each within DBpedia's limits: how many labels hold each word, counted no further than one past
:data:`~kifqa.kb.index.MAX_ANY_NAMES` (a common word costs no more than a rare one); then the labels holding any of
the uncommon words, all of them (their count is known, and at most 16 times that bound, under DBpedia's 10,000
rows). How many labels there are in all, for the words' rarity, is asked once.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kif_lib.compiler.sparql.results import SPARQL_Results

from kifqa.data.text import index_key
from kifqa.kb.index import MAX_ANY_NAMES, any_words_share, rarity, search_words, uncommon

_LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"

#: Runs one SELECT query on the endpoint (through the base's limited, retried client).
Select = Callable[[str], Awaitable[SPARQL_Results]]


@dataclass(frozen=True)
class Named:
    """A resource the any-word search found: its IRI, the label that matched, and its rank's keys."""

    iri: str
    label: str
    #: :func:`~kifqa.kb.index.any_words_share` of the label.
    share: float
    #: Virtuoso's text score of the label.
    score: int


class AnyWordSearch:
    """The any-word search of the resources in ``namespace`` on a Virtuoso endpoint reached by ``select``."""

    def __init__(self, select: Select, namespace: str) -> None:
        self._select = select
        self._namespace = namespace
        self._names: int | None = None

    async def search(self, text: str, limit: int) -> list[Named]:
        """Up to ``limit`` resources whose label holds an uncommon word of ``text`` (a text of two words or more),
        those holding the larger share of its words, by rarity, first."""
        words = search_words(text)
        if len(words) < 2:
            return []
        holding = _counts(await self._select(self.counts_query(words)))
        rare = uncommon(words, {w: holding.get(w, 0) for w in words})
        if not rare:
            return []
        if self._names is None:
            self._names = _number(await self._select(f"SELECT (COUNT(*) AS ?n) WHERE {{ ?s {_LABEL} ?l }}"))
        names = self._names
        weights = {w: rarity(names, holding.get(w, 0)) for w in words}
        rows = _labels(await self._select(self.names_query(rare, sum(holding.get(w, 0) for w in rare))))
        found: dict[str, Named] = {}
        for iri, label, score in rows:
            named = Named(iri, label, any_words_share(weights, index_key(label)), score)
            if iri not in found or (named.share, named.score) > (found[iri].share, found[iri].score):
                found[iri] = named
        return sorted(found.values(), key=lambda n: (-n.share, -n.score, n.iri))[:limit]

    def counts_query(self, words: list[str]) -> str:
        """How many labels hold each of ``words``, counted to one past :data:`~kifqa.kb.index.MAX_ANY_NAMES`."""
        parts = " UNION ".join(
            f"{{ SELECT ({json.dumps(w)} AS ?w) WHERE {{ {self._pattern(_phrase(w))} }} LIMIT {MAX_ANY_NAMES + 1} }}"
            for w in dict.fromkeys(words))
        return f"SELECT ?w (COUNT(*) AS ?n) WHERE {{ {parts} }} GROUP BY ?w"

    def names_query(self, words: list[str], rows: int) -> str:
        """The resources and labels holding any of ``words`` with Virtuoso's text score, at most ``rows`` + 1."""
        terms = " OR ".join(map(_phrase, words))
        return (f"SELECT ?s ?l ?sc WHERE {{ {self._pattern(terms, score=True)} }} "
                f"ORDER BY DESC(?sc) LIMIT {rows + 1}")

    def _pattern(self, terms: str, *, score: bool = False) -> str:
        option = " OPTION (score ?sc)" if score else ""
        return (f"?s {_LABEL} ?l . ?l bif:contains {json.dumps(terms)}{option} . "
                f"FILTER (lang(?l) = \"en\" && STRSTARTS(STR(?s), {json.dumps(self._namespace)}))")


def _phrase(word: str) -> str:
    """``word`` as a ``bif:contains`` term (a word of :func:`~kifqa.kb.index.search_words`: letters and digits)."""
    return f'"{word}"'


def _bindings(result: SPARQL_Results) -> list[dict[str, Any]]:
    return [dict(row) for row in result.get("results", {}).get("bindings", [])]


def _counts(result: SPARQL_Results) -> dict[str, int]:
    return {row["w"]["value"]: int(row["n"]["value"]) for row in _bindings(result) if "w" in row and "n" in row}


def _number(result: SPARQL_Results) -> int:
    rows = _bindings(result)
    return int(rows[0]["n"]["value"]) if rows and "n" in rows[0] else 0


def _labels(result: SPARQL_Results) -> list[tuple[str, str, int]]:
    return [(row["s"]["value"], row["l"]["value"], int(row["sc"]["value"]))
            for row in _bindings(result) if {"s", "l", "sc"} <= row.keys()]
