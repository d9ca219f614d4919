"""What one question's run decided, step by step, and the trace written from it once, with a typed
:class:`~kifqa.types.Decision` for every rule that fired (naming, for a rule written for a dataset convention, the
pool's prior that let it fire)."""

from __future__ import annotations

from dataclasses import dataclass

from kifqa.examples.priors import PoolPriors
from kifqa.pipeline.answers import Answered
from kifqa.pipeline.attempt import Attempt
from kifqa.pipeline.redraft import Kind, Reason, Redraft
from kifqa.pipeline.relations import Choice, Option
from kifqa.types import (
    Answer,
    ConstraintOutcome,
    ConstraintResult,
    Convention,
    Decision,
    Input,
    Pattern,
    Relation,
    Rule,
    Trace,
    TriedDraft,
    clipped,
)


@dataclass(frozen=True)
class Outcome:
    """The first attempt, the second drafts tried for it (before its choice, and for a kind after its answers), the
    choice and the answers: each set as its step ends, so that a question that stops early keeps what it found."""

    first: Attempt
    redraft: Redraft | None = None
    choice: Choice | None = None
    answered: Answered | None = None
    kind: Kind | None = None

    @property
    def kind_taken(self) -> Kind | None:
        """The kind's second draft where it was taken."""
        return self.kind if self.kind is not None and self.kind.answered is not None else None

    @property
    def taken(self) -> Attempt:
        """The attempt the answers come from."""
        if (kind := self.kind_taken) is not None and kind.redraft.taken is not None:
            return kind.redraft.taken
        if self.redraft is not None and self.redraft.taken is not None:
            return self.redraft.taken
        return self.first

    @property
    def patterns(self) -> tuple[Pattern, ...]:
        """The draft answered: the taken attempt's, or for a kind its main pattern with the first as constraint."""
        if self.kind_taken is not None:
            return (self.taken.main, self.first.main)
        return self.taken.drafted.patterns

    @property
    def answered_taken(self) -> Answered | None:
        """The answers of the attempt taken (``None`` before step 4 ran)."""
        kind = self.kind_taken
        return kind.answered if kind is not None else self.answered

    @property
    def answers(self) -> tuple[Answer, ...]:
        answered = self.answered_taken
        return answered.answers if answered is not None else ()

    def tried(self) -> list[TriedDraft]:
        """Every draft tried, in order, the taken one marked."""
        taken = self.taken
        out = [self.first.tried(taken=self.first is taken)]
        for redraft in (self.redraft, self.kind.redraft if self.kind is not None else None):
            if redraft is not None:
                out += [a.tried(taken=a is taken) for a in redraft.tried]
                out += [TriedDraft(error=error) for error in redraft.failed]
        return out

    def write(self, trace: Trace, priors: PoolPriors) -> None:
        """Writes what was decided into ``trace``, the decisions of convention rules with their ``priors``."""
        taken = self.taken
        trace.draft_output, trace.draft = clipped(taken.drafted.output), list(self.patterns)
        trace.examples = list(taken.drafted.examples)
        if taken.linking is not None:
            trace.candidates = taken.linking.candidates
            trace.entities = [c.id for c in taken.linking.kept]
        trace.options = [r for o in taken.options for r in o.relations()]
        kind = self.kind_taken
        choice = kind.choice if kind is not None else self.choice
        if choice is not None:
            trace.relations = choice.option.relations()
        answered = self.answered_taken
        if answered is not None:
            trace.filters, trace.constraints = list(answered.filters), list(answered.constraints)
        trace.attempts = self.tried()
        trace.decisions = _decisions(self, priors)


def _decisions(outcome: Outcome, priors: PoolPriors) -> list[Decision]:
    """Every rule that fired, in the order the steps ran."""
    taken = outcome.taken
    out = _linked(outcome.first, priors)
    if outcome.redraft is not None:
        out.append(_redrafted(outcome.redraft, outcome.first, outcome.choice, priors))
        if outcome.redraft.taken is taken:
            out += _linked(taken, priors)
    if outcome.choice is not None:
        out += _chosen(outcome.choice, step="relations", priors=priors)
    if outcome.answered is not None:
        out += [_constrained(c) for c in outcome.answered.constraints]
    if outcome.kind is not None:
        out += _kind(outcome.kind, outcome, priors)
    return out


def _linked(attempt: Attempt, priors: PoolPriors) -> list[Decision]:
    """The known entity's replacement by a longer name of the question or the name it qualifies, and its name found
    with a handle's digits dropped, if any."""
    drafted, linking = attempt.drafted, attempt.linking
    out = []
    if drafted.regrounded is not None:
        how, before = drafted.regrounded
        rule = Rule(how)
        prior = priors.inputs(Convention.COMMA) if rule is Rule.QUALIFIED else {}
        out.append(Decision(rule=rule, step="draft", taken=True,
                            inputs={"drafted": before, "known": drafted.main.known, **prior}))
    if linking is not None and linking.handle:
        out.append(Decision(rule=Rule.HANDLE, step="entities", taken=True,
                            inputs={"drafted": drafted.main.known, "found": linking.query,
                                    **priors.inputs(Convention.HANDLE)}))
    return out


def _relations(option: Option | None) -> tuple[Relation, ...]:
    return tuple(option.relations()) if option is not None else ()


def _redrafted(redraft: Redraft, first: Attempt, choice: Choice | None, priors: PoolPriors) -> Decision:
    """A second draft, taken or refused, with the scores the policy compared (:func:`~kifqa.pipeline.redraft.beats`)
    and, for an offered answer, the prior that let it be tried."""
    best = max((a.best for a in redraft.tried), default=float("-inf"))
    prior = priors.inputs(Convention.OFFERED) if redraft.reason is Reason.OFFERED else {}
    return Decision(
        rule=Rule.REDRAFT, step="redraft", taken=redraft.taken is not None,
        inputs={"reason": redraft.reason.value, "first": str(first.main), "first_best": _score(first.best),
                "second": str(redraft.taken.main) if redraft.taken is not None else None,
                "second_best": _score(best), "tried": len(redraft.tried), "failed": len(redraft.failed), **prior},
        chosen=_relations(choice.option) if redraft.taken is not None and choice is not None else (),
        instead=_relations(first.options[0]) if redraft.taken is not None and first.options else ())


def _score(score: float) -> float | None:
    return round(score, 4) if score > float("-inf") else None


def _chosen(choice: Choice, *, step: str, priors: PoolPriors) -> list[Decision]:
    """The rule that chose the relation without the model, if one did; and where the question's article told the
    chosen option's namesakes apart, that rule."""
    told = [Decision(rule=Rule.ARTICLE, step=step, taken=True,
                     inputs={"kept": len(choice.option.entities), "of": choice.option.namesakes,
                             **priors.inputs(Convention.ARTICLE)})] if choice.option.namesakes else []
    if choice.by == "model":
        return told
    first, chosen = choice.ranked[0], choice.option
    second = choice.ranked[1].score if len(choice.ranked) > 1 else None
    inputs: dict[str, Input] = {
        "options": len(choice.ranked), "first": first.property.label, "first_score": round(first.score, 4),
        "first_votes": round(first.votes, 4), "second_score": None if second is None else round(second, 4),
        "chosen": chosen.property.label, "chosen_votes": round(chosen.votes, 4)}
    return [Decision(rule=Rule(choice.by), step=step, taken=True, inputs=inputs, chosen=_relations(chosen),
                     instead=_relations(first) if chosen is not first else ()), *told]


def _constrained(outcome: ConstraintOutcome) -> Decision:
    return Decision(rule=Rule.CONSTRAINT, step="answers", taken=outcome.result is ConstraintResult.APPLIED,
                    inputs={"constraint": str(outcome.constraint), "result": outcome.result.value,
                            "kept": outcome.kept, "of": outcome.of})


def _kind(kind: Kind, outcome: Outcome, priors: PoolPriors) -> list[Decision]:
    """The second draft for a kind's answers: the redraft, its choice, and the kind taken as its constraint or not.
    """
    assert outcome.answered is not None and outcome.choice is not None
    out = [_redrafted(kind.redraft, outcome.first, kind.choice, priors)]
    if kind.choice is not None:
        out += _chosen(kind.choice, step="redraft", priors=priors)
    second = kind.choice.option if kind.choice is not None else None
    first = outcome.choice.option
    out.append(Decision(
        rule=Rule.KIND, step="redraft", taken=kind.answered is not None,
        inputs={"answers": len(outcome.answered.answers),
                "narrower": len(kind.narrower.answers) if kind.narrower is not None else None,
                "first_votes": round(first.votes, 4),
                "second_votes": round(second.votes, 4) if second is not None else None, "error": kind.error},
        chosen=_relations(second) if kind.answered is not None else (),
        instead=_relations(first) if kind.answered is not None else ()))
    return out
