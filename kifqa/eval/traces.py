"""Figures over traces for scoring and reports: the seconds of each step, and costs per question."""

from __future__ import annotations

from collections.abc import Iterable

from kifqa.types import Trace

#: Step timings of a trace, in pipeline order (``total`` is the whole question).
STEPS = ("draft", "entities", "relations", "answers", "total")


def step_timings(traces: Iterable[Trace]) -> dict[str, list[float]]:
    """Each step's seconds (:data:`STEPS`), over the traces that reached the step."""
    out: dict[str, list[float]] = {step: [] for step in STEPS}
    for t in traces:
        for step in STEPS:
            if t.timings.get(step) is not None:
                out[step].append(float(t.timings[step]))
    return out


def costs_per_question(traces: list[Trace]) -> dict[str, float]:
    """LLM calls, prompt (all and uncached) and completion tokens, KB calls and seconds per question."""
    n = len(traces) or 1
    return {
        "llm_calls_per_question": sum(len(t.llm_calls) for t in traces) / n,
        "prompt_tokens_per_question": sum(t.prompt_tokens for t in traces) / n,
        "uncached_prompt_tokens_per_question": sum(t.uncached_prompt_tokens for t in traces) / n,
        "completion_tokens_per_question": sum(t.completion_tokens for t in traces) / n,
        "kb_calls_per_question": sum(t.kb_calls for t in traces) / n,
        "seconds_per_question": sum(t.seconds for t in traces) / n,
    }
