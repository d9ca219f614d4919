"""The ``gold`` backend answers drafts and relation choices of the real dataset's questions from their gold."""

from __future__ import annotations

import asyncio

import pytest

from kifqa.config import Settings
from kifqa.examples.sources import FixedExamples
from kifqa.llm import open_llm
from kifqa.llm.gold import GoldLLM
from kifqa.pipeline import draft, relations
from kifqa.pipeline.relations import Option
from kifqa.types import Candidate, Pattern


@pytest.fixture(scope="module")
def gold(settings: Settings) -> GoldLLM:
    llm = open_llm(settings.model_copy(update={"llm": settings.llm.model_copy(update={"backend": "gold"})}))
    assert isinstance(llm, GoldLLM)
    return llm


def test_drafts_are_the_gold_triples_of_train_and_valid(gold: GoldLLM) -> None:
    # valid row 1: Q318926 P19 ... "where was sasha vujačić born"; a train question asks backward (R).
    request = draft.request("Where was Sasha Vujačić born?", FixedExamples().select(""))
    [out] = asyncio.run(gold.agenerate([request]))
    assert out.ok and draft.parse(out.text) == [Pattern("sasha vujačić", "place of birth", "?x")]
    backward = next(d for d in gold.drafts.values() if d.startswith("(?x"))
    assert backward.endswith(")") and len(gold.drafts) > 20_000


def test_the_choice_is_the_option_with_the_gold_property_and_direction(gold: GoldLLM) -> None:
    sasha = Candidate(id="Q318926", label="Sasha Vujačić")
    shown = [Option((sasha,), Candidate(id=p, label=label), direction, 0.0, 0.0) for p, label, direction in (
        ("P27", "country of citizenship", "forward"), ("P19", "place of birth", "backward"),
        ("P19", "place of birth", "forward"), ("P20", "place of death", "forward"))]
    pattern = Pattern("sasha vujačić", "born in", "?x")
    [out] = asyncio.run(gold.agenerate([relations.request("where was sasha vujačić born", pattern, shown)]))
    assert relations.parse(out.text, shown) is shown[2]
    # without the gold option the gold model answers the first
    without = [o for o in shown if o.property.id != "P19"]
    [out] = asyncio.run(gold.agenerate([relations.request("where was sasha vujačić born", pattern, without)]))
    assert relations.parse(out.text, without) is without[0]


def test_an_unknown_question_is_an_error_for_that_request_only(gold: GoldLLM) -> None:
    known = draft.request("where was sasha vujačić born", [])
    unknown = draft.request("how many moons does the pluto system have in 2031", [])
    first, second = asyncio.run(gold.agenerate([unknown, known]))
    assert first.error and "no gold draft" in first.error and second.ok
