"""Step 2: entities for the draft's known label, found with the knowledge base's search."""

from __future__ import annotations

from dataclasses import dataclass

from kifqa.data.text import name_key
from kifqa.kb.base import KnowledgeBase
from kifqa.pipeline.text import SPELLING_MATCH, relaxed, similarity
from kifqa.types import Candidate


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


def names(candidate: Candidate) -> list[str]:
    return [candidate.label, *candidate.aliases]


async def link(kb: KnowledgeBase, label: str, *, limit: int = 50, max_kept: int = 10,
               max_near: int = 5) -> Linking:
    """Searches ``label`` (then its relaxed forms if it finds nothing) and keeps the candidates."""
    query, candidates = label, await kb.search_entities(label, limit=limit)
    for form in relaxed(label) if not candidates else ():
        query, candidates = form, await kb.search_entities(form, limit=limit)
        if candidates:
            break
    wanted = name_key(label)
    exact = [c for c in candidates if any(name_key(n) == wanted for n in names(c))]
    if exact:
        return Linking(query, candidates, exact[:max_kept], True)
    return Linking(query, candidates, typos_first(label, candidates)[:max_near], False)


def typos_first(label: str, candidates: list[Candidate]) -> list[Candidate]:
    """``candidates`` with those named as close as a typo of ``label`` first ("Philip Pullman" for "phillip
    pullman", before "Phillip Adams"), each part in the search's order."""
    def far(c: Candidate) -> bool:
        return similarity(label, c.label, c.aliases, floor=SPELLING_MATCH) < SPELLING_MATCH

    return sorted(candidates, key=far)
