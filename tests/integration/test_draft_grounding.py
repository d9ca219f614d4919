"""The known entities a second draft admits are grounded in the label index: the grammar admits the question's
runs that name an item exactly, as the question writes them; and a drafted name is widened to the name that holds
it (real data, real index)."""

from __future__ import annotations

import asyncio

from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.pipeline import draft


def _grounded(kb: KifKnowledgeBase, question: str) -> list[str] | None:
    return asyncio.run(draft.grounded(kb, question))


def test_a_title_with_punctuation_is_admitted_as_written(local_kb: KifKnowledgeBase) -> None:
    found = _grounded(local_kb, "what kind of game is gekisou sentai carranger: zenkai! racer senshi?")
    assert found is not None and "gekisou sentai carranger: zenkai! racer senshi" in found
    assert "gekisou sentai carranger zenkai racer senshi" not in found  # the question's own form only
    g = draft.grammar("what kind of game is gekisou sentai carranger: zenkai! racer senshi?", found)
    known = next(line for line in g.splitlines() if line.startswith("known ::="))
    assert draft._any_case("gekisou sentai carranger: zenkai! racer senshi") in known
    assert draft._any_case("kind of game") not in known  # a run that names nothing


def test_the_exact_label_not_the_longer_run(local_kb: KifKnowledgeBase) -> None:
    found = _grounded(local_kb, "Name a professional singer-songwriter")
    assert found is not None and "singer-songwriter" in found
    assert "professional singer-songwriter" not in found and "professional" not in found


def test_a_name_written_without_its_apostrophes_is_admitted(local_kb: KifKnowledgeBase) -> None:
    """Questions drop apostrophes as they drop accents: "mark ohara" names Mark O'Hara."""
    found = _grounded(local_kb, "what position does mark ohara play in football")
    assert found is not None and "mark ohara" in found
    found = _grounded(local_kb, "who was the architect of the structure st wenefredes church, bickley?")
    assert found is not None and "st wenefredes church, bickley" in found


def test_a_title_of_ten_words_is_admitted(local_kb: KifKnowledgeBase) -> None:
    question = "who produced the lord of the rings: the fellowship of the ring"
    found = _grounded(local_kb, question)
    assert found is not None and "the lord of the rings: the fellowship of the ring" in found


def test_all_runs_when_none_links(local_kb: KifKnowledgeBase) -> None:
    assert _grounded(local_kb, "zqxv wkpq") is None
    g = draft.grammar("zqxv wkpq", None)
    assert draft._any_case("zqxv wkpq") in g


def _widened(kb: KifKnowledgeBase, question: str, known: str) -> str | None:
    return asyncio.run(draft.widened(kb, question, known))


def test_a_known_entity_inside_a_longer_name_is_widened_to_it(local_kb: KifKnowledgeBase) -> None:
    question = "Which entity was involved in the anglo-soviet invasion of iran?"
    assert _widened(local_kb, question, "iran") == "anglo-soviet invasion of iran"
    assert _widened(local_kb, "which language is used throughout the film  high school musical: el desafío",
                    "High School Musical") == "high school musical: el desafío"


def test_a_possessive_known_entity_is_widened_to_the_name_that_holds_it(local_kb: KifKnowledgeBase) -> None:
    assert _widened(local_kb, "what kind of rock is on mickey finn's t-rex", "mickey finn") == "mickey finn's t-rex"


def test_a_known_entity_no_longer_name_holds_is_kept(local_kb: KifKnowledgeBase) -> None:
    assert _widened(local_kb, "where was sasha vujačić born", "sasha vujačić") is None
    assert _widened(local_kb, "what country is the sheltering sky from", "sheltering sky") is None  # an article only
    assert _widened(local_kb, "zqxv wkpq", "zqxv") is None
