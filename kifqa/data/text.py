"""The keys texts are compared by: names of entities, questions of two datasets, label-index lookups.

Two rules are in use, and they differ on purpose only until they are made one:

- :func:`normalize` (entity linking, relation matching, evaluation): NFKC, case-folded, words only
  (punctuation between words becomes a space; ``'``, ``.``, ``&`` and ``-`` inside a word stay),
  accents kept: ``"Vujačić"`` and ``"vujacic"`` are different names.
- :func:`index_key` (the label index and the search tiers of remote searches): NFKD, case-folded,
  accents dropped, whitespace collapsed, punctuation kept: ``"Vujačić"`` and ``"vujacic"`` are the
  same name. :func:`question_key` is its words.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+(?:['’.&-]\w+)*")
_PLAIN_WORD = re.compile(r"\w+")
_ARTICLES = ("the ", "a ", "an ")


def normalize(text: str) -> str:
    """Lower-case, NFKC, punctuation to spaces, spaces collapsed (accents kept)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_WORD.findall(text))


def words(text: str) -> list[str]:
    """The words of ``text`` as written (case kept), as :func:`normalize` cuts them."""
    return _WORD.findall(unicodedata.normalize("NFKC", text))


def name_key(text: str) -> str:
    """What makes two names the same name: :func:`normalize` without a leading article."""
    norm = normalize(text)
    for article in _ARTICLES:
        if norm.startswith(article):
            return norm[len(article):]
    return norm


def index_key(text: str) -> str:
    """Case-folded text without diacritics and with single spaces: the label index's key of exact matches."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())


def question_key(text: str) -> str:
    """What makes two questions of two datasets the same question: their words, ignoring case, accents and
    punctuation."""
    return " ".join(_PLAIN_WORD.findall(index_key(text)))
