"""The trace's typed parts survive its JSON: the error kind and the constraint outcomes; its dict is asdict's."""

from __future__ import annotations

import dataclasses
import json

from kifqa.types import (
    Candidate,
    ConstraintOutcome,
    ConstraintResult,
    ErrorKind,
    FilterRun,
    LLMCall,
    Pattern,
    Relation,
    Trace,
)


def test_error_kind_and_constraints_round_trip_through_json() -> None:
    trace = Trace("q", "which city in portugal did he die in", draft=[Pattern("he", "place of death", "?x"),
                                                                       Pattern("?x", "country", "portugal")])
    trace.constraints.append(ConstraintOutcome(constraint=trace.draft[1], result=ConstraintResult.APPLIED, kept=1, of=3))
    trace.fail(ErrorKind.KB, "KBError: local: facts failed: timed out", step="answers")
    data = json.loads(trace.to_json())
    assert data["error_kind"] == "kb" and data["constraints"][0]["result"] == "applied"
    back = Trace.from_dict(data)
    assert back == trace and back.error_kind is ErrorKind.KB
    assert str(back.constraints[0]) == "constraint (?x | country | portugal): kept 1 of 3 answers"


def test_a_trace_written_before_kinds_reads_without_them() -> None:
    old = {"question_id": "q", "question": "x", "error": "model call failed: boom", "error_step": "draft",
           "notes": ["constraint (?x | country | portugal): kept 1 of 3 answers"]}
    trace = Trace.from_dict(old)
    assert trace.error_kind is None and trace.constraints == [] and trace.error_step == "draft"


def test_to_dict_is_what_asdict_gives_with_its_enums_as_values() -> None:
    trace = Trace("q", "who directed jaws", kb="local", model="m", draft=[Pattern("jaws", "director", "?x")],
                  candidates=[Candidate(id="Q189875", label="Jaws", aliases=("Jaws (film)",), score=3.9)],
                  options=[Relation(entity="Q189875", property="P57", direction="forward")],
                  filters=[FilterRun(relation=Relation(entity="Q189875", property="P57", direction="forward"),
                                     filter="Filter(...)", sparql="SELECT ...", n_statements=1, seconds=0.01)],
                  llm_calls=[LLMCall(step="draft", prompt_tokens=12)], timings={"total": 0.5})
    trace.constraints.append(ConstraintOutcome(constraint=trace.draft[0], result=ConstraintResult.UNMET, kept=0, of=1))
    trace.fail(ErrorKind.NO_STATEMENTS, "no statements", step="relations")
    expected = dataclasses.asdict(trace) | {"error_kind": "no_statements"}
    expected["constraints"] = [{**c, "result": "unmet"} for c in expected["constraints"]]
    assert trace.to_dict() == expected and type(trace.to_dict()["candidates"][0]["aliases"]) is tuple
