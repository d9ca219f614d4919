"""Text matching shared by the pipeline steps (the keys themselves are :mod:`kifqa.data.text`'s)."""

from __future__ import annotations

import difflib
import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence

from kifqa.data.text import (
    ARTICLES,
    PLAIN_WORD,
    WORD,
    article_split,
    fold,
    name_key,
    normalize,
    question_key,
    spaced,
    typed_key,
)
from kifqa.types import Candidate

_POSSESSIVE = re.compile(r"['’]s$")
_PATTERN_SYNTAX = re.compile(r"[|()?\n]")
#: The most words of a run a name may take ("the lord of the rings: the fellowship of the ring" takes 10).
MAX_RUN = 10


def ngrams(text: str, *, max_len: int = MAX_RUN) -> list[str]:
    """Every run of up to ``max_len`` consecutive words of ``text`` (possessive ``'s`` also dropped), but those
    wholly inside a parenthesis (:func:`aside`)."""
    text = unicodedata.normalize("NFKC", text)  # as :func:`~kifqa.data.text.words` cuts words
    found = list(WORD.finditer(text))
    ws, within_aside = [m.group() for m in found], aside(text, found)
    out: dict[str, None] = {}
    for i in range(len(ws)):
        for j in range(i + 1, min(i + max_len, len(ws)) + 1):
            if all(within_aside[i:j]):
                continue
            gram = " ".join(ws[i:j])
            out[gram] = None
            bare = _POSSESSIVE.sub("", gram)
            if bare and bare != gram:
                out[bare] = None
    return list(out)


def spans(text: str, *, max_len: int = MAX_RUN) -> list[str]:
    """Every run of up to ``max_len`` consecutive words of ``text`` as the text writes it, with the
    punctuation between its words (``carranger: zenkai! racer``); possessive ``'s`` also dropped. None is wholly
    inside a parenthesis (:func:`aside`)."""
    found = list(WORD.finditer(text))
    within_aside = aside(text, found)
    out: dict[str, None] = {}
    for i in range(len(found)):
        for j in range(i, min(i + max_len, len(found))):
            run = spaced(text[found[i].start():found[j].end()])
            if _PATTERN_SYNTAX.search(run):  # a pattern could not hold it
                break
            if all(within_aside[i:j + 1]):
                continue
            out[run] = None
            bare = _POSSESSIVE.sub("", run)
            if bare and bare != run:
                out[bare] = None
    return list(out)


_ASIDE = re.compile(r"\([^()]*\)")


def aside(text: str, found: list[re.Match[str]]) -> list[bool]:
    """For each word ``found`` in ``text``, whether it is inside a parenthesis: a disambiguation as Wikipedia writes
    it ("starlight (warriors)", "heartbreaker (dionne warwick album)"), not what the question asks about. Not gated:
    it reads punctuation, not words of a language, and the Wikipedia disambiguations it is written for are those
    DBpedia's resource names carry too."""
    asides = [m.span() for m in _ASIDE.finditer(text)]
    return [any(a < w.start() and w.end() < b for a, b in asides) for w in found]


#: What :func:`masked` writes for a name.
STAND_IN = "it"


def masked(question: str, name: str) -> str | None:
    """``question`` with its first run of ``name``'s words (case, accents and punctuation folded) written
    :data:`STAND_IN`: what it asks, whoever it asks it about (``who is it parent?``). ``None`` when it has no
    such run."""
    run = _first_run(question, name)
    if run is None:
        return None
    found, i, j = run
    return question[:found[i].start()] + STAND_IN + question[found[j - 1].end():]


def _first_run(question: str, name: str, *, start: int = 0) -> tuple[list[re.Match[str]], int, int] | None:
    """``question``'s words and where its first run of ``name``'s words (case, accents and punctuation folded) from
    its ``start``-th word on begins and ends (exclusive); ``None`` when it has none, or ``name`` has no words."""
    wanted = [fold(w) for w in PLAIN_WORD.findall(name)]
    if not wanted:
        return None
    found = list(PLAIN_WORD.finditer(question))
    folded = [fold(m.group()) for m in found]
    for i in range(start, len(found) - len(wanted) + 1):
        if folded[i:i + len(wanted)] == wanted:
            return found, i, i + len(wanted)
    return None


_COMMA = re.compile(r"\s*,\s*")


def before_comma(question: str, name: str) -> list[str]:
    """Where ``question``'s first run of ``name``'s words (case, accents and punctuation folded) comes right after
    a comma, the runs of up to :data:`MAX_RUN` words that end at that comma, as written, longest first ("born in new
    bedford", ..., "bedford" for ``massachusetts`` in "born in new bedford, massachusetts"); none where ``name``'s
    run follows no comma, or a comma and a quote ("the 2012 film, 'battleship'")."""
    run = _first_run(question, name, start=1)
    if run is None:
        return []
    found, i, _ = run
    if not _COMMA.fullmatch(question[found[i - 1].end():found[i].start()]):
        return []
    start = max(0, i - MAX_RUN)
    for j in range(i - 2, start - 1, -1):  # the run stops at an earlier comma
        if "," in question[found[j].end():found[j + 1].start()]:
            start = j + 1
            break
    end = found[i - 1].end()
    return [spaced(question[found[j].start():end]) for j in range(start, i)]


def within(part: str, whole: str) -> bool:
    """Whether the words of the question key ``part`` are a run of the words of the question key ``whole``
    (:func:`~kifqa.data.text.question_key`)."""
    return f" {part} " in f" {whole} "


def outermost(runs: list[str]) -> list[str]:
    """The runs whose words are inside no longer one of ``runs`` (case, accents and punctuation folded)."""
    keys = [question_key(r) for r in runs]
    return [r for r, k in zip(runs, keys) if not any(len(o) > len(k) and within(k, o) for o in keys)]


def article_before(question: str, name: str) -> str | None:
    """The article ``question`` writes right before the first run of ``name``'s words (``name``'s own article
    aside): "the" in "what genre is the suicide club", ``""`` in "which author wrote infidel"; ``None`` where the
    question has no such run."""
    said, wanted = typed_key(question).split(), article_split(name)[1].split()
    for i in range(len(said) - len(wanted) + 1):
        if wanted and said[i:i + len(wanted)] == wanted:
            return said[i - 1] if i and said[i - 1] in ARTICLES else ""
    return None


def names(candidate: Candidate) -> list[str]:
    """The names ``candidate`` goes by: its label, then its aliases."""
    return [candidate.label, *candidate.aliases]


def article_takers(question: str, known: str, candidates: Sequence[Candidate]) -> frozenset[str] | None:
    """The ids of ``candidates`` (items named ``known`` up to a leading article) with a name that takes the article
    ``question`` writes right before ``known``'s words (none as it writes none): "The Suicide Club" for "what genre
    is the suicide club", "Infidel" for "which author wrote infidel". ``None`` where it writes no such run. That a
    question copies a name's article is a convention of SimpleQuestions ("plays the guitar" writes one the name
    does not take): the relation step follows it only where the example pool bears it out
    (:attr:`~kifqa.types.Convention.ARTICLE`)."""
    if (said := article_before(question, known)) is None:
        return None
    _, rest = article_split(known)
    return frozenset(c.id for c in candidates if any(article_split(n) == (said, rest) for n in names(c)))


def relaxed(text: str) -> list[str]:
    """Looser forms of a label to search when the label itself finds nothing."""
    bare = _POSSESSIVE.sub("", text.strip())
    return [f for f in dict.fromkeys((normalize(bare), name_key(bare))) if f and f != text]


def singular(text: str) -> str | None:
    """``text`` without the s that ends its last word, a plural or a possessive written without its apostrophe
    ("dramas", "ray krocs" for Ray Kroc's), when that word has four letters or more and ends in one s;
    ``None`` otherwise. English only: the linking applies it to an English pool's questions alone."""
    head, _, last = text.strip().rpartition(" ")
    if len(last) < 4 or not last.isalpha() or last[-1] not in "sS" or last[-2] in "sS":
        return None
    return f"{head} {last[:-1]}".lstrip()


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


_STOP = frozenset("a an the of in on at by for to is was are were be been what which who whom where".split())


def tokens(text: str) -> frozenset[str]:
    """Content-word stems of ``text``."""
    return _content(normalize(text))


def _content(norm: str) -> frozenset[str]:
    """Content-word stems of the :func:`normalize`-d text ``norm``."""
    return frozenset(_stem(w) for w in norm.split() if w not in _STOP)


#: :func:`similarity` of a text that is exactly a name's label, or exactly one of its aliases.
LABEL_MATCH, ALIAS_MATCH = 1.0, 0.9
#: :func:`similarity` from which a name is spelled as close as a typo ("chid" for "child"; below, spelling
#: similarity is noise next to meaning).
SPELLING_MATCH = 0.7


def similarity(text: str, label: str, aliases: Iterable[str] = (), *, floor: float = 0.0) -> float:
    """How well ``text`` names a thing: :data:`LABEL_MATCH` for its label, :data:`ALIAS_MATCH` for one
    of its aliases (after normalisation), else the best of content-word overlap and spelling
    similarity (typos: "chid" for "child"), scaled below 0.8. A value under ``floor`` may come out lower
    than it is: the spellings that cannot reach ``floor`` are not compared (each comparison costs tens of
    microseconds)."""
    return _similarity(text, label, tuple(aliases), floor)


@functools.lru_cache(maxsize=1 << 16)
def _similarity(text: str, label: str, aliases: tuple[str, ...], floor: float) -> float:
    """:func:`similarity`, remembered: a question's predicate meets the same properties as many others'."""
    norm, toks, spelled = _name(text)
    names = _names(label, aliases)
    if names[0][0] == norm:
        return LABEL_MATCH
    if any(n == norm for n, _, _ in names[1:]):
        return ALIAS_MATCH
    best = max((len(toks & o) / len(toks | o) for _, o, _ in names if toks and o), default=0.0)
    need = max(best, floor / 0.8 - 1e-9)
    for _, _, other in names:
        total = len(spelled) + len(other)
        if total and 2 * min(len(spelled), len(other)) / total <= need:  # SequenceMatcher.real_quick_ratio
            continue
        matcher = difflib.SequenceMatcher(None, spelled, other)
        if need < matcher.quick_ratio():
            best = max(best, matcher.ratio())
            need = max(need, best)
    return 0.8 * best


@functools.lru_cache(maxsize=1 << 16)
def _name(text: str) -> tuple[str, frozenset[str], str]:
    """``text`` :func:`normalize`-d, its content-word stems, and those stems sorted and spelled out."""
    norm = normalize(text)
    toks = _content(norm)
    return norm, toks, " ".join(sorted(toks))


@functools.lru_cache(maxsize=1 << 14)
def _names(label: str, aliases: tuple[str, ...]) -> tuple[tuple[str, frozenset[str], str], ...]:
    """:func:`_name` of a thing's label and of each of its aliases (properties recur in every question)."""
    return tuple(_name(n) for n in (label, *aliases))


#: Digits that end a word of letters: a handle's ("chocolatestarfish26", "honeycone1969"), in SimpleQuestions; dropped
#: only where the example pool bears that convention out (:attr:`~kifqa.types.Convention.HANDLE`: "area51" joins
#: the name's own digits).
HANDLE_DIGITS = re.compile(r"(?<=[^\W\d_])\d+$")


def offered(question: str, name: str, *, exact: bool = True) -> bool:
    """Whether ``name`` is one of the answers ``question`` offers to choose from, next to one of its "or"s ("male"
    in "is ferruccio furlanetto male or female?"), or that "or", or (where it names no item ``exact``-ly) two of them
    with the "or" between ("denmark or sweden"): answers, not the entity the question asks about. A convention of
    SimpleQuestions, not of questions ("who was born first, A or B" asks about A and B): its rules follow it only
    where the example pool bears it out (:attr:`~kifqa.types.Convention.OFFERED`)."""
    key, whole = question_key(name), f" {question_key(question)} "
    if not exact and " or " in f" {key} ":
        return True
    return key == "or" or (bool(key) and (f" {key} or " in whole or f" or {key} " in whole))
