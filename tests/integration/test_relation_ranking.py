"""The relation step's ranking by meaning, with the real question encoder: where the draft names no
property exactly, the property closest in meaning to the question and predicate is shown first."""

from __future__ import annotations

import pytest

from kifqa.kb.base import PropertyUse
from kifqa.pipeline import relations
from kifqa.pipeline.entities import Linking
from kifqa.pipeline.ranking import MeaningRanker
from kifqa.types import Candidate, Pattern

CLUTTER = Candidate(id="Q1947410", label="Your Future Our Clutter", description="album by The Fall")
COUNTRY = Candidate(id="P17", label="country", description="sovereign state that this subject item is in")
PERFORMER = Candidate(id="P175", label="performer",
                      description="actor, musician, band or other performer associated with this role or musical work")
BASED_ON = Candidate(id="P144", label="based on", description="the work(s) or inputs used as the basis for subject item")
LYRICS = Candidate(id="P676", label="lyrics by", description="author of song lyrics")


def test_the_property_closest_in_meaning_comes_first() -> None:
    ranker = MeaningRanker()
    question, pattern = "What band recorded your future our clutter?", Pattern("future our clutter", "band", "?x")
    props = [COUNTRY, BASED_ON, PERFORMER, LYRICS]
    closeness = ranker.closeness(question, pattern.predicate, props)
    assert max(closeness, key=closeness.__getitem__) == "P175"
    assert all(0.0 <= v <= 1.0 for v in closeness.values())
    by_entity = {CLUTTER.id: [PropertyUse(property=p, direction="forward") for p in props]}
    linking = Linking("future our clutter", [CLUTTER], [CLUTTER], False)
    by_names = relations.options(pattern, linking, by_entity, question=question)
    by_meaning = relations.options(pattern, linking, by_entity, question=question, closeness=closeness)
    assert by_meaning[0].property.id == "P175" and by_meaning[0].match == relations.MEANING_MATCH * closeness["P175"]
    assert by_names[0].property.id != "P175", "spelling and shared words alone put another property first"
    again = ranker.closeness(question, pattern.predicate, props)
    assert again == pytest.approx(closeness, abs=1e-6), "the same with cached embeddings"


def test_an_exact_name_still_comes_first_and_needs_no_model() -> None:
    born = Candidate(id="P19", label="place of birth", aliases=("born in",), description="most specific birth location")
    home = Candidate(id="P551", label="residence", description="the place where the person is or has been, resident")
    entity = Candidate(id="Q1", label="Sasha Vujačić")
    closeness = MeaningRanker().closeness("where did sasha vujačić live", "born in", [born, home])
    by_entity = {entity.id: [PropertyUse(property=home, direction="forward"), PropertyUse(property=born, direction="forward")]}
    ranked = relations.options(Pattern("sasha vujačić", "born in", "?x"), Linking("x", [entity], [entity], True),
                               by_entity, question="where did sasha vujačić live", closeness=closeness)
    assert ranked[0].property.id == "P19" and relations.obvious(ranked) is ranked[0]


def test_a_typo_still_finds_its_property() -> None:
    child = Candidate(id="P40", label="child", description="subject has object as child")
    author = Candidate(id="P50", label="author", description="main creator(s) of a written work")
    leiber = Candidate(id="Q313185", label="Fritz Leiber")
    props = [author, child]
    closeness = MeaningRanker().closeness("who is the chid of fritz leiber?", "chid", props)
    by_entity = {leiber.id: [PropertyUse(property=p, direction="forward") for p in props]}
    ranked = relations.options(Pattern("fritz leiber", "chid", "?x"), Linking("x", [leiber], [leiber], True),
                               by_entity, question="who is the chid of fritz leiber?", closeness=closeness)
    assert ranked[0].property.id == "P40" and ranked[0].match >= relations.SPELLING_MATCH
