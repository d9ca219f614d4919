"""What a question's trace says about whether its answers are right: the evidence a fitted confidence weighs.

:func:`features` reads a :class:`Features` from a :class:`~kifqa.types.Trace` and the answer count: the four
hand-set factors of :func:`kifqa.eval.silver.confidence`, the model's own probabilities (of its draft and of its
relation choice, where the backend reported them) and the agreement between independent signals (how the relation
was chosen, the precedent votes for it, the search margin, namesakes, constraints, the answer count).
:data:`FEATURE_NAMES` orders them as :meth:`Features.vector` gives them to a model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from kifqa.eval.silver import (
    confidence,
    exactly_named,
    model_took_first,
    relation_call,
    relation_chosen_by,
    search_margin,
    used_entities,
)
from kifqa.types import ConstraintResult, Rule, Trace


@dataclass(frozen=True, kw_only=True)
class Features:
    """One answered question's evidence, every value a number (flags 0 or 1)."""

    #: The hand-set factors (:class:`kifqa.eval.silver.Confidence`).
    entity: float
    relation: float
    constraints: float
    answers: float
    #: How the relation was chosen: the only option, by a rule without the model, by the model (one is 1).
    only_option: float
    by_rule: float
    by_model: float
    #: The precedent votes took another option over the one the draft named exactly.
    overruled: float
    #: The model chose the first (lexically best) option.
    model_first: float
    #: The log probability of the model's relation choice (0 where the model did not choose or gave none).
    choice_logprob: float
    #: The draft's mean and least token log probability (0 where the backend gave none).
    draft_mean_logprob: float
    draft_min_logprob: float
    #: Whether the model's probabilities are known (the draft's, and the choice's where it chose).
    has_logprobs: float
    #: The share of the precedent votes for the chosen option, where a rule recorded it (else 0).
    votes: float
    #: How far the best used candidate's search score leads the others' (:func:`kifqa.eval.silver.search_margin`).
    search_margin: float
    #: Exactly named candidates not used (namesakes put aside), as log(1 + n).
    namesakes: float
    #: log(1 + entities the chosen relations use).
    entities: float
    #: log(1 + answers).
    n_answers: float
    #: The draft's constraints by outcome.
    constraints_applied: float
    constraints_unmet: float
    constraints_unresolved: float
    #: Whether a filter's result may have been cut short.
    truncated: float
    #: Whether a second draft gave the answers.
    redrafted: float

    def vector(self) -> tuple[float, ...]:
        """The values in :data:`FEATURE_NAMES` order."""
        return tuple(getattr(self, name) for name in FEATURE_NAMES)


#: The features in the order :meth:`Features.vector` gives them.
FEATURE_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Features))


def features(trace: Trace, n_answers: int) -> Features:
    """The evidence of an answered question (``n_answers`` answers) in its ``trace``."""
    factors = confidence(trace, n_answers)
    by = relation_chosen_by(trace)
    choice = relation_call(trace)
    draft = next((c for c in trace.llm_calls if c.step == "draft"), None)
    known = draft is not None and draft.mean_logprob is not None and (choice is None or choice.logprob is not None)
    chosen_votes = next((d.inputs.get("chosen_votes") for d in reversed(trace.decisions)
                         if d.rule in (Rule.OBVIOUS, Rule.OVERRULED)), None)
    used = used_entities(trace)
    results = [c.result for c in trace.constraints]
    return Features(
        entity=factors.entity, relation=factors.relation, constraints=factors.constraints, answers=factors.answers,
        only_option=float(by == "only"), by_rule=float(by == "rule"), by_model=float(by == "model"),
        overruled=float(any(d.rule is Rule.OVERRULED and d.taken for d in trace.decisions)),
        model_first=float(model_took_first(trace)),
        choice_logprob=_number(choice.logprob if choice is not None else None),
        draft_mean_logprob=_number(draft.mean_logprob if draft is not None else None),
        draft_min_logprob=_number(draft.min_logprob if draft is not None else None),
        has_logprobs=float(known),
        votes=_number(chosen_votes),
        search_margin=search_margin(trace),
        namesakes=math.log1p(len(exactly_named(trace) - set(used))),
        entities=math.log1p(len(used)),
        n_answers=math.log1p(max(0, n_answers)),
        constraints_applied=float(results.count(ConstraintResult.APPLIED)),
        constraints_unmet=float(results.count(ConstraintResult.UNMET)),
        constraints_unresolved=float(results.count(ConstraintResult.UNRESOLVED)),
        truncated=float(any(f.truncated for f in trace.filters)),
        redrafted=float(any(a.taken for a in trace.attempts[1:])),
    )


def _number(value: object) -> float:
    """``value`` as a float where it is a finite number, else 0."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return 0.0
