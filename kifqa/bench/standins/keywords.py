"""DBpedia Lookup's keyword matching over a label index's items, as its searcher builds Lucene queries.

DBpedia Lookup (github.com/dbpedia/dbpedia-lookup, ``LuceneLookupSearcher``, with the query settings of its
``dbpedia-lookup-search`` configuration) asks each word of the query as three term queries: exact (boost 5), prefix
(2) and fuzzy (1: at most 2 edits, a transposition counting one, the first 2 characters as written). A resource
matches where its label, or a redirect's label, holds every word so (weight 10 each), and its score is multiplied
by ``sqrt(refCount + 1)``.

Here a label is the item's label, its redirects are its aliases and its ``refCount`` its statements in the base;
words are the index's folded words (case and accents folded). Lookup also matches any word of a resource's
comment (weight 0.5): the DBpedia-encoded build gives its resources none. Lucene's term statistics (BM25) are not
modelled: an item named exactly the query comes first, as BM25's length norm puts the shortest names first, then
the score.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

from kifqa.bench.standins.names import Match, Names, within_edits
from kifqa.data.text import index_key

#: Each term query's boost (Lookup's ``exactMatchBoost``, ``prefixMatchBoost``, ``fuzzyMatchBoost``).
EXACT, PREFIX, FUZZY = 5.0, 2.0, 1.0
#: Lookup's ``fuzzyEditDistance`` and ``fuzzyPrefixLength``.
FUZZY_EDITS, FUZZY_PREFIX = 2, 2
#: The weight of the label and the redirects' labels.
WEIGHT = 10.0


@dataclass(frozen=True)
class Scored:
    """A matched item: the name that matched best, and its score."""

    match: Match
    score: float


class Keywords:
    """The items of ``names`` matched by words as DBpedia Lookup's ``/api/search`` matches them."""

    def __init__(self, names: Names) -> None:
        self.names = names
        #: Each item name: (entity rowid, text, is it the label, its folded words).
        self._rows = [(entity, text, is_label, norm.split()) for norm, entity, text, is_label in names.of("item")]
        self._holders: dict[str, set[int]] = {}
        for row, (_, _, _, words) in enumerate(self._rows):
            for word in words:
                self._holders.setdefault(word, set()).add(row)
        self._vocab = sorted(self._holders)

    def search(self, text: str) -> list[Scored]:
        """The items matching ``text``, best first."""
        words = index_key(text).split()
        boosts = [self._boosts(t) for t in dict.fromkeys(words)]
        if not boosts:
            return []
        # per entity and field (label, redirects): the best name's score and row
        best: dict[tuple[int, bool], tuple[float, int]] = {}
        for row in _every(self._holders, boosts):
            entity, _, is_label, held = self._rows[row]
            score = sum(max(b.get(word, 0.0) for word in held) for b in boosts)
            if (entity, is_label) not in best or score > best[entity, is_label][0]:
                best[entity, is_label] = (score, row)
        found = []
        for entity in {entity for entity, _ in best}:
            fields = [best[entity, is_label] for is_label in (True, False) if (entity, is_label) in best]
            e = self.names.entities[entity]
            score = WEIGHT * sum(score for score, _ in fields) * math.sqrt(e.degree + 1)
            exact = [row for _, row in fields if self._rows[row][3] == words]
            _, name, is_label, _ = self._rows[(exact or [row for _, row in fields])[0]]
            found.append(Scored(Match(e, name, "label" if is_label else "alias", bool(exact)), score))
        return sorted(found, key=lambda s: (not s.match.exact, -s.score, s.match.entity.id))

    @functools.lru_cache(maxsize=4096)  # noqa: B019  # the names live as long as the server
    def _boosts(self, token: str) -> dict[str, float]:
        """The words that ``token``'s exact, prefix and fuzzy queries match, with their summed boosts."""
        boosts: dict[str, float] = {}
        for word in self._vocab[bisect.bisect_left(self._vocab, token):]:
            if not word.startswith(token):
                break
            boosts[word] = EXACT + PREFIX + FUZZY if word == token else PREFIX
        start = token[:FUZZY_PREFIX]
        for word in self._vocab[bisect.bisect_left(self._vocab, start):]:
            if not word.startswith(start):
                break
            if word != token and abs(len(word) - len(token)) <= FUZZY_EDITS and _fuzzy(token, word):
                boosts[word] = boosts.get(word, 0.0) + FUZZY
        return boosts


def _every(holders: dict[str, set[int]], boosts: list[dict[str, float]]) -> set[int]:
    """The rows holding, for every token, a word its queries match."""
    every: set[int] | None = None
    for b in sorted(boosts, key=len):
        rows = set().union(*(holders[word] for word in b))
        every = rows if every is None else every & rows
        if not every:
            return set()
    return every if every is not None else set()


def _fuzzy(a: str, b: str) -> bool:
    """Whether Lucene's fuzzy query of ``a`` matches the word ``b``: at most :data:`FUZZY_EDITS` edits (insertions,
    deletions, substitutions, transpositions of neighbours), fewer than either word has characters."""
    limit = min(FUZZY_EDITS, len(a) - 1, len(b) - 1)
    return limit > 0 and within_edits(a, b, limit, transpositions=True)
