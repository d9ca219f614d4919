"""``kifqa bench llm`` measures the draft requests the pipeline sends, in the pipeline's order."""

from __future__ import annotations

from kifqa.bench.llm import draft_requests
from kifqa.config import ExamplesSettings, Settings
from kifqa.examples.sources import FixedExamples
from kifqa.pipeline import draft


def test_the_benchmark_sends_the_pipelines_draft_request(data_dir) -> None:
    settings = Settings(data_dir=data_dir, examples=ExamplesSettings(mode="fixed"))
    questions = ["who wrote the novel dracula", "when was alan turing born"]
    sent = draft_requests(settings, questions)
    assert sent == [draft.request(q, FixedExamples().select(q), prefix_key="fixed") for q in questions]
    assert sent[0].grammar == draft.grammar(questions[0])  # the pipeline's grammar, not a looser one
