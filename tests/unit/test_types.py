"""The trace's typed parts survive its JSON: the error kind and the constraint outcomes."""

from __future__ import annotations

import json

from kifqa.types import ConstraintOutcome, ConstraintResult, ErrorKind, Pattern, Trace


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
