"""The ``gold`` backend: a zero-cost model that answers the questions it is given the gold drafts of.

It stands in for a model that costs nothing, so that benchmarks and large-corpus tests measure kifqa,
Ray and the knowledge base alone. The draft of a train or valid question is its gold triple written as
the examples write it (by default :func:`~kifqa.data.pool.gold_examples`: SimpleQuestions-Wikidata's train and
valid splits and SimpleDBpediaQA's validation questions; a test may give it a pool's own); a relation choice is
the shown option whose property label and direction are those of the gold draft (the first option when none
is). A question without a gold draft gets an error completion. Grammars are not applied: the answers
are what a perfect model would say.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kifqa.data.pool import Example
from kifqa.data.text import normalize
from kifqa.llm.base import LLM, ChatRequest, Completion, Usage
from kifqa.types import Pattern, RelationChoice


class GoldLLM(LLM):
    """Answers drafts and relation choices of the questions it knows from their gold."""

    identity = "gold:sqwd"

    def __init__(self, examples: Iterable[Example]) -> None:
        """Args:
            examples: The questions it knows, with their gold drafts (the first of a question's repeats counts).
        """
        self.drafts: dict[str, str] = {}
        for example in examples:
            self.drafts.setdefault(normalize(example.question), example.draft)

    def draft(self, question: str) -> str | None:
        """The gold draft of ``question``, if it is a known question."""
        return self.drafts.get(normalize(question))

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        return [self._answer(r) for r in requests]

    def _answer(self, request: ChatRequest) -> Completion:
        user = request.messages[-1].content
        choice = RelationChoice.parse(user)
        question = choice.question if choice else user
        draft = self.draft(question)
        if draft is None:
            return Completion(error=f"no gold draft for {question[:100]!r}")
        text = _choose(draft, choice) if choice else draft
        return Completion(text, Usage())


def _choose(draft: str, choice: RelationChoice) -> str:
    """The number of the option that states the gold draft's property in its direction ("1" if none does)."""
    gold = Pattern.parse(draft.splitlines()[0])
    for number, option in enumerate(choice.options, 1):
        if gold and (option.pattern.predicate, option.pattern.direction) == (gold.predicate, gold.direction):
            return str(number)
    return "1"
