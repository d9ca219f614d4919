"""An attempt at a question: one draft and what steps 2 and 3 found for it. A second draft is a new attempt,
compared with the first (:mod:`kifqa.pipeline.redraft`); neither changes the other."""

from __future__ import annotations

from dataclasses import dataclass

from kifqa.pipeline import entities, relations
from kifqa.pipeline.context import Context
from kifqa.pipeline.draft import Drafted
from kifqa.pipeline.entities import Linking
from kifqa.pipeline.relations import Option
from kifqa.types import Pattern, TriedDraft


@dataclass(frozen=True)
class Attempt:
    """A draft, the entities its known entity links to (``None`` before step 2 ran) and their relation options,
    best first (none without kept entities)."""

    drafted: Drafted
    linking: Linking | None = None
    options: tuple[Option, ...] = ()

    @property
    def main(self) -> Pattern:
        return self.drafted.main

    @property
    def best(self) -> float:
        """The score of the best option (minus infinity without options)."""
        return self.options[0].score if self.options else float("-inf")

    def tried(self, *, taken: bool) -> TriedDraft:
        """The attempt as the trace lists it."""
        kept = self.linking.kept if self.linking is not None else []
        return TriedDraft(draft=self.drafted.patterns, entities=tuple(c.id for c in kept),
                          best_option=self.best if self.options else None, taken=taken,
                          oracle=self.drafted.given)


async def follow(ctx: Context, drafted: Drafted) -> Attempt:
    """Steps 2 and 3 (the ranking, not the choice) for ``drafted``."""
    linking = await entities.step(ctx, drafted.main)
    return Attempt(drafted, linking, await relations.step(ctx, drafted.main, linking))
