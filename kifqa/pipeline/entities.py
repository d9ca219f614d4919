"""Step 2: entities for the draft's known label, found with the knowledge base's search."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import combinations

from kifqa.data.text import name_key, typed_key
from kifqa.examples.text import HANDLE_DIGITS, SPELLING_MATCH, names, relaxed, similarity, singular
from kifqa.kb.base import KnowledgeBase
from kifqa.pipeline.context import Context
from kifqa.types import Candidate, Convention, Pattern


@dataclass(frozen=True)
class Linking:
    """What the search found for a label and which candidates are kept.

    ``exact`` is true when the kept entities are all named exactly by the label (or an alias;
    case, punctuation and a leading article aside):
    the question cannot tell them apart by name, so all of them go on and the relation step's
    evidence (which of them has a fitting property) decides. Otherwise the kept ones are the best
    near matches, and the relation step's model call chooses among them too.
    """

    query: str
    candidates: list[Candidate]
    kept: list[Candidate]
    exact: bool
    #: Whether ``query`` is the label written without its spaces, found with a handle's trailing digits dropped
    #: (:func:`unjoined`).
    handle: bool = False


async def step(ctx: Context, pattern: Pattern) -> Linking:
    """Step 2: the entities ``pattern``'s known label names, within the settings' limits (:func:`link`), a handle's
    digits dropped where the pool bears :attr:`~kifqa.types.Convention.HANDLE` out, an English plural's s where the
    pool is English."""
    s = ctx.settings
    return await link(ctx.kb, pattern.known, limit=s.search_limit, max_kept=s.max_entities,
                      max_near=s.max_near_entities, handles=ctx.follows(Convention.HANDLE), plurals=ctx.english)


async def link(kb: KnowledgeBase, label: str, *, limit: int = 50, max_kept: int = 10,
               max_near: int = 5, handles: bool = True, plurals: bool = True) -> Linking:
    """Searches ``label`` (then its relaxed forms, then the name it writes without spaces, if it finds nothing,
    with ``handles`` a handle's trailing digits dropped; then, with ``plurals`` (English labels), its
    :func:`~kifqa.examples.text.singular`, if nothing is named exactly) and keeps the candidates."""
    query, candidates = label, await kb.search_entities(label, limit=limit)
    for form in relaxed(label) if not candidates else ():
        query, candidates = form, await kb.search_entities(form, limit=limit)
        if candidates:
            break
    named, key, handle = label, name_key, False
    if not candidates and (spaced := await unjoined(kb, label, handles=handles)):  # named exactly, punctuation folded
        query, candidates = spaced, await kb.search_entities(spaced, limit=limit)
        named, key = spaced, typed_key
        handle = handles and any(HANDLE_DIGITS.search(w) for w in label.split())
    exact = named_exactly(candidates, named, key=key)
    if not exact and plurals and (one := singular(label)):  # "dramas", "ray krocs": a plural, or a possessive's bare s
        found = await kb.search_entities(one, limit=limit)
        exact = named_exactly(found, one)
        if exact or not candidates:
            query, candidates, handle = one, found, False
    if exact:
        return Linking(query, candidates, exact[:max_kept], True, handle)
    return Linking(query, candidates, typos_first(label, candidates)[:max_near], False, handle)


def named_exactly(candidates: list[Candidate], name: str, *,
                  key: Callable[[str], str] = name_key) -> list[Candidate]:
    """The ``candidates`` whose label or an alias is ``name``, as ``key`` compares names."""
    wanted = key(name)
    return [c for c in candidates if any(key(n) == wanted for n in names(c))]


def typos_first(label: str, candidates: list[Candidate]) -> list[Candidate]:
    """``candidates`` with those named as close as a typo of ``label`` first ("Philip Pullman" for "phillip
    pullman", before "Phillip Adams"), each part in the search's order."""
    def far(c: Candidate) -> bool:
        return similarity(label, c.label, c.aliases, floor=SPELLING_MATCH) < SPELLING_MATCH

    return sorted(candidates, key=far)


#: The longest word :func:`unjoined` cuts in three (a word's cuts in three grow with the square of its length).
_MAX_CUT3 = 20


async def unjoined(kb: KnowledgeBase, label: str, *, handles: bool = True) -> str | None:
    """``label`` with one of its words cut in two (else in three) so that it is exactly an item's name, case,
    accents and punctuation folded: a name the question wrote without its spaces ("thezutons", "jimmarcus"), with
    ``handles`` as a handle, its trailing digits dropped ("chocolatestarfish26"). Fewer cuts first, then the word's
    order; ``None`` when no cut names an item, or when the base cannot tell."""
    words = [HANDLE_DIGITS.sub("", w) if handles else w for w in label.split()]
    for parts in (2, 3):
        forms = [" ".join([*words[:i], *cut, *words[i + 1:]]) for i, word in enumerate(words)
                 if len(word) >= 5 and (parts == 2 or len(word) <= _MAX_CUT3) for cut in _cuts(word, parts)]
        found = await kb.named(forms) if forms else None
        if found:
            return found[0]
    return None


def _cuts(word: str, parts: int) -> Iterator[list[str]]:
    """``word`` cut into ``parts`` non-empty pieces, every way, in order."""
    for at in combinations(range(1, len(word)), parts - 1):
        bounds = (0, *at, len(word))
        yield [word[a:b] for a, b in zip(bounds, bounds[1:])]
