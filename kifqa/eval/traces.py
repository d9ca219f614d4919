"""Reading a trace's steps for scoring and reports: the drafted patterns and the chosen relations of a
trace dict (:attr:`kifqa.runs.results.Prediction.trace`), and costs per question over traces."""

from __future__ import annotations

from typing import Any

from kifqa.types import UNKNOWN, Trace

#: Step timings of a trace, in pipeline order (``total`` is the whole question).
STEPS = ("draft", "entities", "relations", "answers", "total")

def patterns(trace: dict[str, Any]) -> list[dict[str, str]]:
    return [p for p in trace.get("draft") or [] if isinstance(p, dict)]


def pattern_text(p: dict[str, str]) -> str:
    return f"({p.get('subject', '')} | {p.get('predicate', '')} | {p.get('object', '')})"


def known_label(p: dict[str, str]) -> str:
    """The known end of a drafted pattern (as :attr:`kifqa.types.Pattern.known`)."""
    return p.get("object", "") if p.get("subject") == UNKNOWN else p.get("subject", "")


def relations(trace: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The chosen (entity, property, direction) triples."""
    return [(r.get("entity", ""), r.get("property", ""), r.get("direction", ""))
            for r in trace.get("relations") or [] if isinstance(r, dict)]


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
