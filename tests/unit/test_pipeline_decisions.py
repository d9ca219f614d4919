"""The redraft policy as data: one function says whether a second draft replaces the first, and the trace keeps
every rule that fired as a typed decision that survives its JSON."""

from __future__ import annotations

import pytest

from kifqa.pipeline import redraft
from kifqa.pipeline.attempt import Attempt
from kifqa.pipeline.draft import Drafted
from kifqa.pipeline.entities import Linking
from kifqa.pipeline.redraft import Reason
from kifqa.pipeline.relations import Option
from kifqa.types import Candidate, Decision, Pattern, Relation, Rule, Trace, TriedDraft

ITEM = Candidate(id="Q1", label="birmingham")
P19 = Candidate(id="P19", label="place of birth")


def attempt(*scores: float, votes: float = 0.0) -> Attempt:
    """An attempt whose options score ``scores`` (best first), the first with ``votes`` of the precedent votes."""
    options = tuple(Option((ITEM,), P19, "backward", match=s, score=s, votes=votes if i == 0 else 0.0)
                    for i, s in enumerate(scores))
    drafted = Drafted("(?x | place of birth | birmingham)", (Pattern("?x", "place of birth", "birmingham"),))
    return Attempt(drafted, Linking("birmingham", [ITEM], [ITEM], True), options)


@pytest.mark.parametrize(("why", "first", "second", "taken"), [
    (Reason.LOW_SCORE, attempt(0.2), attempt(0.25), True),  # unsure first: a better second replaces it
    (Reason.LOW_SCORE, attempt(0.2), attempt(0.2), False),  # a tie keeps the first
    (Reason.NO_STATEMENTS, attempt(), attempt(0.25), False),  # the first has nothing: the second must be sure
    (Reason.NO_STATEMENTS, attempt(), attempt(0.3), True),
    (Reason.NO_ENTITY, attempt(), attempt(), False),
    (Reason.OFFERED, attempt(0.9), attempt(0.35), True),  # the first's options do not count
    (Reason.KIND, attempt(0.9), attempt(0.29), False),
    (Reason.UNASKED, attempt(0.9), attempt(0.5, votes=0.2), False),  # the votes must ask for the second's option
    (Reason.UNASKED, attempt(0.9), attempt(0.5, votes=0.4), True),
])
def test_one_policy_says_whether_a_second_draft_replaces_the_first(why: Reason, first: Attempt, second: Attempt,
                                                                   taken: bool) -> None:
    assert redraft.beats(second, first, why, below=0.3) is taken


def test_without_a_floor_any_option_beats_a_first_with_none() -> None:
    assert redraft.beats(attempt(0.01), attempt(), Reason.NO_ENTITY, below=None)
    assert not redraft.beats(attempt(), attempt(), Reason.NO_ENTITY, below=None)


def test_decisions_and_attempts_survive_the_trace_s_json() -> None:
    trace = Trace("q", "who was born in birmingham")
    trace.decisions = [Decision(rule=Rule.OVERRULED, step="relations", taken=True,
                                inputs={"first": "occupation", "first_votes": 0.05, "chosen_votes": 0.6, "said": False},
                                chosen=(Relation("Q1", "P19", "backward"),), instead=(Relation("Q2", "P106", "backward"),))]
    trace.attempts = [TriedDraft(draft=(Pattern("?x", "occupation", "actor"),), entities=("Q2",), best_option=0.9),
                      TriedDraft(draft=(Pattern("?x", "place of birth", "birmingham"),), entities=("Q1",),
                                 best_option=1.05, taken=True),
                      TriedDraft(error="the draft is empty")]
    again = Trace.from_dict(trace.to_dict())
    assert again.decisions == trace.decisions and again.attempts == trace.attempts
    assert again.decisions[0].rule is Rule.OVERRULED


def test_the_evaluation_counts_each_rule_and_whether_it_helped() -> None:
    """An overruling that chose the gold relation helped; one that put it aside hurt; a constraint is counted as
    fired and taken, never judged (it chose no relation)."""
    from kifqa.eval.datasets import GoldQuestion
    from kifqa.eval.decisions import decision_counts

    gold = GoldQuestion(id="g", text="who was born in birmingham", topic="Q1", property="R19", answer="Q9")
    born, job = Relation("Q1", "P19", "backward"), Relation("Q2", "P106", "backward")

    def trace(*decisions: Decision) -> Trace:
        t = Trace("g", gold.text)
        t.decisions = list(decisions)
        return t

    def overruled(chosen: Relation, instead: Relation) -> Decision:
        return Decision(rule=Rule.OVERRULED, step="relations", taken=True, chosen=(chosen,), instead=(instead,))

    constraint = Decision(rule=Rule.CONSTRAINT, step="answers", taken=False, inputs={"result": "unmet"})
    counts = decision_counts([(gold, trace(overruled(born, job), constraint)), (gold, trace(overruled(job, born)))])
    assert counts == {"overruled": {"fired": 2, "taken": 2, "judged": 2, "helped": 1, "hurt": 1},
                      "constraint": {"fired": 1, "taken": 0, "judged": 0, "helped": 0, "hurt": 0}}
