"""What the example pool says of the dataset conventions some rules are written for.

A few rules encode how SimpleQuestions writes its questions, not how questions work: the name after a comma
qualifies the one before it (``comma``); a name next to an "or" is an answer the question offers, not what it asks
about (``offered``); the article a question writes before a name is the one the name takes (``article``); digits
that end a word of letters are a handle's, no part of the name (``handle``). Each is counted over the pool's
questions and their gold topics where its rule would act: ``shows``, where the rule would be right, ``against``,
where it would be wrong. A rule fires only where its prior holds (:attr:`~kifqa.config.PipelineSettings.prior_share`
and :attr:`~kifqa.config.PipelineSettings.prior_least`), so another corpus gets the conventions its own pool shows,
or none.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from kifqa.data.pool import Example
from kifqa.data.text import WORD, article_split, question_key, typed_key
from kifqa.examples.text import HANDLE_DIGITS, article_before, before_comma, offered
from kifqa.types import Convention, Input

_OR, _DIGIT = re.compile(r"\bor\b", re.IGNORECASE), re.compile(r"\d")


@dataclass(frozen=True)
class Prior:
    """How many of the pool's questions a convention's rule would act on bear it out (``shows``) or not
    (``against``)."""

    shows: int = 0
    against: int = 0

    @property
    def share(self) -> float:
        """The share of those questions that bear the convention out (0 where the rule would act on none)."""
        seen = self.shows + self.against
        return self.shows / seen if seen else 0.0

    def holds(self, *, share: float, least: int) -> bool:
        """Whether at least ``least`` questions and at least ``share`` of those the rule would act on bear the
        convention out."""
        return self.shows >= least and self.share >= share


@dataclass(frozen=True)
class PoolPriors:
    """Each convention's :class:`Prior` over a pool of ``questions`` examples."""

    questions: int = 0
    comma: Prior = Prior()
    offered: Prior = Prior()
    article: Prior = Prior()
    handle: Prior = Prior()

    def prior(self, convention: Convention) -> Prior:
        return {Convention.COMMA: self.comma, Convention.OFFERED: self.offered, Convention.ARTICLE: self.article,
                Convention.HANDLE: self.handle}[convention]

    def inputs(self, convention: Convention) -> dict[str, Input]:
        """What a decision records of the prior that let its rule fire."""
        return {"prior": convention.value, "prior_share": round(self.prior(convention).share, 4)}


def pool_priors(examples: Sequence[Example]) -> PoolPriors:
    """The priors of ``examples``: each question's verdict on each convention (:func:`_comma`, :func:`_offered`,
    :func:`_article`, :func:`_handle`), counted. The article and handle verdicts need the gold topic's names
    (:attr:`~kifqa.data.pool.Example.names`); an example without them has none. Kept for the process's last few
    pools: every example source over the same pool shares them."""
    return _pool_priors(tuple(examples))


@functools.lru_cache(maxsize=4)
def _pool_priors(examples: tuple[Example, ...]) -> PoolPriors:
    """:func:`pool_priors` of a hashable pool."""
    namesakes = _namesakes(examples)
    counts: dict[Convention, list[int]] = {c: [0, 0] for c in Convention}
    for e in examples:
        known = e.known()
        verdicts = {Convention.COMMA: _comma(e.question, known), Convention.OFFERED: _offered(e.question, known),
                    Convention.ARTICLE: _article(e.question, known, e.names, namesakes),
                    Convention.HANDLE: _handle(e.question, e.names)}
        for convention, verdict in verdicts.items():
            if verdict is not None:
                counts[convention][0 if verdict else 1] += 1
    priors = {c.value: Prior(shows, against) for c, (shows, against) in counts.items()}
    return PoolPriors(len(examples), **priors)


def _comma(question: str, topic: str) -> bool | None:
    """``False`` where ``topic`` follows a comma after other words (``comma_known`` would put the name before the
    comma in its place); ``True`` where it ends at a comma that more words follow (a draft over the name after the
    comma would be put right); ``None`` otherwise."""
    if "," not in question:
        return None
    if before_comma(question, topic):
        return False
    key = question_key(topic)
    for comma in re.finditer(",", question):
        after = WORD.search(question, comma.end())
        if after and any(question_key(run) == key for run in before_comma(question, after.group())):
            return True
    return None


def _offered(question: str, topic: str) -> bool | None:
    """Where ``question`` has an "or" between two words: whether ``topic`` is not one of the answers it offers
    (:func:`~kifqa.examples.text.offered`); ``None`` elsewhere."""
    if not _OR.search(question) or "or" not in question_key(question).split()[1:-1]:
        return None
    return not offered(question, topic)


def _namesakes(examples: Sequence[Example]) -> dict[str, set[str]]:
    """For each name up to its article (:func:`~kifqa.data.text.article_split`), the articles the pool's topics'
    names take with it (``""``: none)."""
    out: dict[str, set[str]] = defaultdict(set)
    for e in examples:
        for name in e.names:
            article, rest = article_split(name)
            out[rest].add(article)
    return out


def _article(question: str, topic: str, names: Sequence[str], namesakes: dict[str, set[str]]) -> bool | None:
    """Where ``question`` writes ``topic`` after an article (or none) that some of the pool's names for it take
    and others do not (the rule would tell namesakes apart by it): whether one of the topic's ``names`` takes it;
    ``None`` elsewhere."""
    articles = namesakes.get(rest := article_split(topic)[1], set())
    if len(articles) < 2 or (said := article_before(question, topic)) not in articles:
        return None
    return any(article_split(name) == (said, rest) for name in names)


def _handle(question: str, names: Sequence[str]) -> bool | None:
    """Where ``question`` writes a word of letters and digits that is not a word of the topic's ``names``: ``True``
    where its letters are one of the names without spaces ("honeycone1969"), ``False`` where the whole word is one
    ("area51" for Area 51); ``None`` elsewhere."""
    if not names or not _DIGIT.search(question):
        return None
    keys = [typed_key(n) for n in names]
    words, joined = {w for k in keys for w in k.split()}, {k.replace(" ", "") for k in keys}
    for word in typed_key(question).split():
        if word in words or not HANDLE_DIGITS.search(word):
            continue
        if HANDLE_DIGITS.sub("", word) in joined:
            return True
        if word in joined:
            return False
    return None
