"""Failure classes and linking accuracy from hand-made traces (the shape of ``Trace.to_dict()``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kifqa.eval.datasets import GoldQuestion, GoldRelation
from kifqa.eval.evaluation import evaluate_predictions
from kifqa.eval.failures import failure_of, linking, resembles
from kifqa.eval.metrics import score
from kifqa.runs import Prediction
from kifqa.types import Answer, Candidate, Fact, Pattern, Question, Relation, Result, Trace

SASHA = GoldQuestion(id="sqwd-valid-0", text="where was sasha vujačić born", topic="Q318926", property="P19", answer="Q1010")
NAMES = ["Sasha Vujačić"]


def trace(*, draft: tuple[str, str, str] | None = ("sasha vujačić", "place of birth", "?x"),
          candidates: tuple[str, ...] = ("Q318926", "Q1292790"), entities: tuple[str, ...] = ("Q318926",),
          relations: tuple[tuple[str, str, str], ...] = (("Q318926", "P19", "forward"),),
          options: tuple[tuple[str, str, str], ...] | None = None,
          error: str | None = None, error_step: str | None = None, error_kind: str | None = None) -> Trace:
    return Trace.from_dict({
        "question_id": "t", "question": "where was sasha vujačić born",
        "draft": [dict(zip(("subject", "predicate", "object"), draft))] if draft else [],
        "candidates": [{"id": c, "label": c, "aliases": [], "description": "", "score": 1.0} for c in candidates],
        "entities": list(entities),
        "relations": [dict(zip(("entity", "property", "direction"), r)) for r in relations],
        "options": [dict(zip(("entity", "property", "direction"), r)) for r in (relations if options is None else options)],
        "error": error, "error_step": error_step, "error_kind": error_kind, "timings": {"total": 0.1},
    })


def fail(t: Trace, predicted: set[str], gold: GoldQuestion = SASHA, expected: set[str] | None = None,
         names: list[str] | None = NAMES) -> tuple[str | None, str | None]:
    expected = {gold.answer} if expected is None else expected
    return failure_of(gold, t, predicted, score(predicted, expected), has_gold=bool(expected), names=names)


def test_right_answer_has_no_failure() -> None:
    assert fail(trace(), {"Q1010"}) == (None, None)


def test_malformed_draft() -> None:
    cls, detail = fail(trace(draft=None, candidates=(), entities=(), relations=(), error="not a pattern: 'x'",
                             error_step="draft"), set())
    assert cls == "draft" and detail.startswith("malformed")


def test_wrong_unknown_is_a_draft_failure() -> None:
    # the model made the birthplace the known entity: the topic is not even searched for
    t = trace(draft=("?x", "place of birth", "maribor"), candidates=("Q1010",), entities=("Q1010",),
              relations=(("Q1010", "P19", "backward"),))
    cls, detail = fail(t, {"Q5", "Q6"})
    assert cls == "draft" and "wrong unknown" in detail and "maribor" in detail


def test_misspelt_topic_that_the_search_misses_is_an_entity_failure() -> None:
    t = trace(draft=("sasha vujacic", "place of birth", "?x"), candidates=("Q1292790",), entities=("Q1292790",),
              relations=(("Q1292790", "P19", "forward"),))
    assert fail(t, {"Q90"}) == ("entity", "not found for 'sasha vujacic'")
    assert resembles("sasha vujacic", NAMES) and not resembles("maribor", NAMES)


def test_topic_found_but_not_kept() -> None:
    t = trace(candidates=("Q1292790", "Q318926"), entities=("Q1292790",), relations=(("Q1292790", "P19", "forward"),))
    assert fail(t, {"Q90"})[0] == "entity" and "not kept" in fail(t, {"Q90"})[1]


def test_entity_step_error_with_the_topic_missing() -> None:
    t = trace(candidates=(), entities=(), relations=(), error="no entity found for 'sasha'", error_step="entities")
    assert fail(t, set())[0] == "entity"


def test_wrong_property_and_wrong_direction() -> None:
    cls, detail = fail(trace(relations=(("Q318926", "P20", "forward"),)), {"Q1"})
    assert cls == "relation" and detail.startswith("wrong property") and "P20 forward" in detail
    cls, detail = fail(trace(relations=(("Q318926", "P19", "backward"),)), {"Q2"})
    assert cls == "relation" and detail.startswith("wrong direction")


def test_empty_and_partial() -> None:
    assert fail(trace(), set())[0] == "empty"
    cls, detail = fail(trace(), {"Q1010", "Q2"})
    assert cls == "partial" and detail == "1 right of 2 predicted, 1 gold"


def test_large_answer_sets_are_a_class_of_their_own() -> None:
    many = {f"Q{i}" for i in range(2, 103)}
    cls, detail = fail(trace(), many | {"Q1010"})
    assert cls == "large" and detail == "102 answers, 1 right of 1 gold"
    assert fail(trace(), set(list(many)[:100]))[0] == "partial", "100 answers are not yet a large set"


def test_errors_outside_entities_and_relations() -> None:
    assert fail(trace(error="timed out after 600 s", error_step="timeout"), set())[0] == "error"
    assert fail(trace(error="KBError: HTTP 500", error_step="answers"), set())[0] == "error"
    # a failed model call is an error, not a malformed draft: its kind says so, not its text
    assert fail(trace(draft=None, error="replay cache miss", error_step="draft", error_kind="model"), set())[0] == "error"
    assert fail(trace(draft=None, error="model call failed: but a malformed draft", error_step="draft",
                      error_kind="model_output"), set())[0] == "draft"


def test_linking() -> None:
    assert linking(SASHA, trace()) == {"entity": True, "relation": True, "property": True, "triple": True,
                                       "offered": True}
    mixed = trace(entities=("Q318926", "Q9"), relations=(("Q9", "P19", "forward"), ("Q318926", "P20", "forward")))
    assert linking(SASHA, mixed) == {"entity": True, "relation": True, "property": True, "triple": False,
                                     "offered": True}
    assert linking(SASHA, trace(relations=(("Q318926", "P19", "backward"),)))["relation"] is False
    no_triple = GoldQuestion(id="g", text="who?", topic="", property="", answer="", answers=("Q1",))
    assert linking(no_triple, trace()) == {"entity": None, "relation": None, "property": None, "triple": None,
                                           "offered": None}


def test_the_relation_step_is_judged_where_its_options_held_the_gold_relation() -> None:
    wrong = (("Q318926", "P20", "forward"),)
    offered = trace(relations=wrong, options=(*wrong, ("Q318926", "P19", "forward")))
    assert linking(SASHA, offered)["offered"] is False
    assert linking(SASHA, trace(relations=wrong))["offered"] is None  # the base gave the step no chance
    assert linking(SASHA, trace(relations=wrong, options=(("Q318926", "P19", "backward"),)))["offered"] is None


DBP = "http://dbpedia.org/resource/"
ONT = "http://dbpedia.org/ontology/"
CLYDE = GoldQuestion(id="sdbqa-valid-00091", text="What US state contains clyde", topic=f"{DBP}Clyde,_Missouri",
                     property=f"{ONT}isPartOf", answer="", alternatives=(GoldRelation(property=f"{ONT}isPartOf", direction="forward"),
                                                          GoldRelation(property=f"{ONT}country", direction="forward")))


def test_dbpedia_linking_with_iris_and_alternative_predicates() -> None:
    t = trace(draft=("clyde", "state", "?x"), candidates=(f"{DBP}Clyde%2C_Missouri",),
              entities=(f"{DBP}Clyde%2C_Missouri",), relations=((f"{DBP}Clyde%2C_Missouri", f"{ONT}country", "forward"),))
    assert linking(CLYDE, t) == {"entity": True, "relation": True, "property": True, "triple": True, "offered": True}
    assert fail(t, {f"{DBP}United_States"}, CLYDE, set(), names=["Clyde, Missouri", "Clyde"]) == (None, None)
    wrong = trace(draft=("clyde", "state", "?x"), candidates=(f"{DBP}Clyde",), entities=(f"{DBP}Clyde",),
                  relations=((f"{DBP}Clyde", f"{ONT}state", "forward"),))
    assert fail(wrong, {"x"}, CLYDE, set(), names=["Clyde, Missouri", "Clyde"])[0] == "entity"
    wrong_predicate = replace(t, relations=[Relation(f"{DBP}Clyde,_Missouri", f"{ONT}state", "forward")])
    assert fail(wrong_predicate, {"x"}, CLYDE, set())[0] == "relation"


def test_linking_accuracy_of_an_evaluation() -> None:
    good = Prediction(question_id=CLYDE.id, answers={f"{DBP}United_States": "United States"},
                      trace=trace(draft=("clyde", "state", "?x"), candidates=(CLYDE.topic,), entities=(CLYDE.topic,),
                            relations=((CLYDE.topic, f"{ONT}isPartOf", "forward"),)))
    other = GoldQuestion(id="sdbqa-valid-1", text="where was x born", topic=f"{DBP}X", property=f"{ONT}birthPlace", answer="",
                         alternatives=(GoldRelation(property=f"{ONT}birthPlace", direction="forward"),))
    bad = Prediction(question_id=other.id, answers={}, trace=trace(draft=("x", "born", "?x"), candidates=(f"{DBP}X",), entities=(f"{DBP}X",),
                                        relations=((f"{DBP}X", f"{ONT}deathPlace", "forward"),)))
    m = evaluate_predictions([CLYDE, other], {CLYDE.id: good, other.id: bad}, None).metrics()
    assert m["answers_scored"] == 0 and m["all"]["n"] == 0
    assert m["linking"]["entity"] == {"n": 2, "correct": 2, "accuracy": 1.0}
    assert m["linking"]["relation"] == {"n": 2, "correct": 1, "accuracy": 0.5}
    assert m["failure_counts"]["relation"] == 1 and sum(m["failure_counts"].values()) == 1


def test_a_result_scores_through_its_prediction() -> None:
    t = Trace("t", SASHA.text, draft=[Pattern("sasha vujačić", "place of birth", "?x")], entities=["Q318926"],
              candidates=[Candidate(id="Q318926", label="Sasha Vujačić", score=3.9)],
              relations=[Relation("Q318926", "P19", "forward")])
    fact = Fact(subject="Q318926", subject_label="Sasha Vujačić", property="P19", property_label="place of birth", value="Q1010", value_label="Maribor")
    result = Result(Question("t", SASHA.text), [Answer(fact=fact, answer="Q1010", answer_label="Maribor")], t)
    p = Prediction.from_result(result)
    assert fail(p.trace, p.answer_set) == (None, None)
    assert fail(p.trace, p.answer_set, expected={"Q1010", "Q2"})[0] == "partial"
    assert p.answers == {"Q1010": "Maribor"} and p.property_labels == {"P19": "place of birth"}


@pytest.mark.parametrize("text,ok", [("bill hosket, jr.", True), ("hosket", True), ("french city", False)])
def test_resembles(text: str, ok: bool) -> None:
    assert resembles(text, ["Bill Hosket"]) is ok
