"""What one question's run decided, step by step, and the trace written from it once."""

from __future__ import annotations

from dataclasses import dataclass

from kifqa.pipeline.answers import Answered
from kifqa.pipeline.attempt import Attempt
from kifqa.pipeline.redraft import Kind, Redraft
from kifqa.pipeline.relations import Choice
from kifqa.types import Answer, Pattern, Trace, TriedDraft


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
    def kind_taken(self) -> bool:
        return self.kind is not None and self.kind.answered is not None

    @property
    def taken(self) -> Attempt:
        """The attempt the answers come from."""
        if self.kind is not None and self.kind.answered is not None and self.kind.redraft.taken is not None:
            return self.kind.redraft.taken
        if self.redraft is not None and self.redraft.taken is not None:
            return self.redraft.taken
        return self.first

    @property
    def patterns(self) -> tuple[Pattern, ...]:
        """The draft answered: the taken attempt's, or for a kind its main pattern with the first as constraint."""
        if self.kind_taken:
            return (self.taken.main, self.first.main)
        return self.taken.drafted.patterns

    @property
    def answers(self) -> tuple[Answer, ...]:
        if self.kind is not None and self.kind.answered is not None:
            return self.kind.answered.answers
        return self.answered.answers if self.answered is not None else ()

    def tried(self) -> list[TriedDraft]:
        """Every draft tried, in order, the taken one marked."""
        taken = self.taken
        out = [self.first.tried(taken=self.first is taken)]
        for redraft in (self.redraft, self.kind.redraft if self.kind is not None else None):
            if redraft is not None:
                out += [a.tried(taken=a is taken) for a in redraft.tried]
                out += [TriedDraft(error=error) for error in redraft.failed]
        return out

    def write(self, trace: Trace) -> None:
        """Writes what was decided into ``trace``."""
        taken = self.taken
        trace.draft_output, trace.draft = taken.drafted.output, list(self.patterns)
        trace.examples = list(taken.drafted.examples)
        if taken.linking is not None:
            trace.candidates = taken.linking.candidates
            trace.entities = [c.id for c in taken.linking.kept]
        trace.options = [r for o in taken.options for r in o.relations()]
        choice = self.kind.choice if self.kind_taken and self.kind is not None else self.choice
        if choice is not None:
            trace.relations = choice.option.relations()
        answered = self.kind.answered if self.kind is not None and self.kind.answered is not None else self.answered
        if answered is not None:
            trace.filters, trace.constraints = list(answered.filters), list(answered.constraints)
        trace.attempts = self.tried()
        trace.notes.extend(_notes(self))


def _notes(outcome: Outcome) -> list[str]:
    """What the rules that fired did, in words."""
    notes = []
    drafted = outcome.taken.drafted
    if drafted.given:
        notes.append("draft given (oracle), no model call")
    if drafted.regrounded is not None:
        how, before = drafted.regrounded
        notes.append(f"known entity {how}: {before!r} -> {drafted.main.known!r}")
    if outcome.redraft is not None:
        notes.append(_redraft_note(outcome.redraft, outcome.first))
    if outcome.choice is not None and outcome.choice.by in ("overruled", "voted"):
        option = outcome.choice.option
        notes.append(f"relation {outcome.choice.by} by the votes of similar questions: {option.property.label!r} "
                     f"({option.direction}), asked for by {option.votes:.0%}")
    if outcome.kind is not None:
        taken = "taken" if outcome.kind_taken else "not taken"
        notes.append(f"second draft for the kind's {len(outcome.answered.answers) if outcome.answered else 0} "
                     f"answers {taken}" + (f": {outcome.kind.error}" if outcome.kind.error else ""))
    return notes


def _redraft_note(redraft: Redraft, first: Attempt) -> str:
    tried = "; ".join([*(f"{a.main} (best option {a.best:.3f})" for a in redraft.tried),
                       *(f"failed: {e}" for e in redraft.failed)])
    if redraft.taken is not None:
        return (f"second draft over exact names taken ({redraft.reason}): {redraft.taken.main} (best option "
                f"{redraft.taken.best:.3f} against {first.best:.3f} for {first.main}; tried: {tried})")
    return f"second draft over exact names ({redraft.reason}) not taken: {tried or 'none'}"
