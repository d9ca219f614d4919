"""The keys texts are compared by: names of entities, questions of two datasets, label-index lookups.

One rule decides when two names are the same name, in the search and in entity linking alike (and in
the gold extension): :func:`fold`, case-folded, compatibility forms unified (NFKD) and accents dropped,
so ``"Vujačić"`` and ``"vujacic"`` are the same name. Accents are dropped rather than kept because
questions are typed without them far more often than two entities differ only by them (docs/eval.md,
"One rule for names", shows what it changes). The keys built on it:

- :func:`normalize` (entity linking, relation matching, evaluation): the folded words (punctuation
  between words becomes a space; ``'``, ``.``, ``&`` and ``-`` inside a word stay); :func:`name_key`
  also drops a leading article and the apostrophes (``"mark ohara"`` names Mark O'Hara: questions are
  typed without them as often as without accents).
- :func:`index_key` (the label index and the search tiers of remote searches): the folded text with
  whitespace collapsed, punctuation kept. :func:`question_key` is its plain words (where a question's runs
  of words lie); :func:`typed_key` joins the words apostrophes part, the label index's key of names as
  questions type them.
"""

from __future__ import annotations

import functools
import re
import unicodedata

#: A word as names and questions are cut into words (``'``, ``.``, ``&`` and ``-`` inside a word stay).
WORD = re.compile(r"\w+(?:['’.&-]\w+)*")
#: A word as question keys cut it (every punctuation mark parts words).
PLAIN_WORD = re.compile(r"\w+")
#: The articles a name may start with, which two names that are the same name may differ by.
ARTICLES = frozenset({"the", "a", "an"})
_NO_APOSTROPHES = str.maketrans("", "", "'’")


#: Latin letters that NFKD leaves whole, a stroke or a dotless i being no combining accent: "Łódź" folds as "lodz".
_WHOLE_LETTERS = str.maketrans({"ł": "l", "ı": "i", "ø": "o", "đ": "d", "ħ": "h", "ŧ": "t", "æ": "ae", "œ": "oe",
                                "þ": "th", "ð": "d"})


@functools.lru_cache(maxsize=1 << 16)
def fold(text: str) -> str:
    """``text`` as names compare: case-folded, compatibility forms unified (NFKD), accents and strokes dropped
    (remembered: a question's text and its candidates' names are folded again and again)."""
    if text.isascii():  # NFKD changes no ASCII character and none combines: 40x faster (~50 misses a question)
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.casefold().translate(_WHOLE_LETTERS))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def normalize(text: str) -> str:
    """The words of :func:`fold`'s ``text``: punctuation between words to spaces, spaces collapsed."""
    return " ".join(WORD.findall(fold(text)))


def words(text: str) -> list[str]:
    """The words of ``text`` as written (case kept), as :func:`normalize` cuts them."""
    return WORD.findall(unicodedata.normalize("NFKC", text))


def name_key(text: str) -> str:
    """What makes two names the same name: :func:`normalize` without a leading article and apostrophes."""
    return _split_article(normalize(text).translate(_NO_APOSTROPHES))[1]


def spaced(text: str) -> str:
    """``text`` with each run of white space one space, and none at its ends: names and descriptions as the label
    index keeps them."""
    return " ".join(text.split())


def index_key(text: str) -> str:
    """:func:`fold`'s ``text`` with single spaces: the label index's key of exact matches."""
    return spaced(fold(text))


def question_key(text: str) -> str:
    """What makes two questions of two datasets the same question: their words, ignoring case, accents and
    punctuation."""
    return " ".join(PLAIN_WORD.findall(index_key(text)))


def typed_key(text: str) -> str:
    """A name as a question may type it: :func:`question_key` with apostrophes dropped, not parting words
    (``"Gridlock'd"`` as ``gridlockd``, ``"Mark O'Hara"`` as ``mark ohara``)."""
    return question_key(text.translate(_NO_APOSTROPHES))


def article_split(name: str) -> tuple[str, str]:
    """The article ``name`` starts with (``""``: none) and the rest of its words as :func:`typed_key` types them:
    ``("the", "suicide club")`` for "The Suicide Club"."""
    return _split_article(typed_key(name))


def _split_article(key: str) -> tuple[str, str]:
    """The article the words of ``key`` start with (``""``: none) and the rest of them."""
    first, _, rest = key.partition(" ")
    return (first, rest) if rest and first in ARTICLES else ("", key)


#: Words a title leaves in lower case (but for its first word): ``The Silence of the Lambs``, ``Antoine de Févin``.
_MINOR_WORDS = frozenset("a an and at by da de del der di du for in la le of on or the to van von".split())


def spellings(text: str) -> tuple[str, ...]:
    """How a name in ``text`` may be written as a label: as written, in lower case, with only its first letter
    upper-cased, with each word's (``James Brown``), and as a title (``Half-Life``, ``The Silence of the
    Lambs``)."""
    each = text.split(" ")
    title = " ".join("-".join(map(_upper_first, w.split("-"))) if i == 0 or w.lower() not in _MINOR_WORDS
                     else w.lower() for i, w in enumerate(each))
    return tuple(dict.fromkeys((text, text.lower(), _upper_first(text), " ".join(map(_upper_first, each)), title)))


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]
