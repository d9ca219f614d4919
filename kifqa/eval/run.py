"""Scores a pipeline on a gold dataset: per-question scores, failure classes, costs."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kifqa.eval.datasets import GoldExtender, GoldQuestion
from kifqa.eval.metrics import Score, score, summarize
from kifqa.model import Question, Result
from kifqa.pipeline import Pipeline

#: Failure classes, in the order they are checked.
FAILURES = ("error", "draft", "entity", "relation", "empty", "partial")


@dataclass
class Scored:
    """One question's result against its gold."""

    gold: GoldQuestion
    result: Result
    expected: set[str]
    score: Score
    failure: str | None

    def row(self) -> dict[str, Any]:
        t = self.result.trace
        return {
            "id": self.gold.id, "question": self.gold.text, "topic": self.gold.topic,
            "property": self.gold.property, "gold": sorted(self.expected),
            "predicted": sorted({a.answer for a in self.result.answers}),
            "precision": self.score.precision, "recall": self.score.recall, "f1": self.score.f1,
            "failure": self.failure, "error": t.error, "error_step": t.error_step,
            "llm_calls": len(t.llm_calls), "prompt_tokens": t.prompt_tokens,
            "uncached_prompt_tokens": t.uncached_prompt_tokens, "seconds": t.seconds,
            "trace": t.to_dict(),
        }


def classify(gold: GoldQuestion, result: Result, s: Score) -> str | None:
    """Why a question fell short of F1 = 1 (``None`` if it did not)."""
    if s.f1 >= 1.0:
        return None
    t = result.trace
    if t.error_step == "draft":
        return "draft"
    if t.error and t.error_step not in ("entities", "relations"):
        return "error"
    if gold.topic not in t.entities:
        return "entity"
    want = "backward" if gold.inverse else "forward"
    if not any(r.property == gold.pid and r.direction == want for r in t.relations):
        return "relation"
    return "empty" if not result.answers else "partial"


@dataclass
class Evaluation:
    scored: list[Scored]
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        n = len(self.scored) or 1
        single = [s.score for s in self.scored if len(s.expected) == 1]
        traces = [s.result.trace for s in self.scored]
        failures = Counter(s.failure for s in self.scored if s.failure)
        return {
            "questions": len(self.scored),
            "all": summarize([s.score for s in self.scored]).as_dict(),
            "single_answer": summarize(single).as_dict(),
            "failures": {k: failures.get(k, 0) / n for k in FAILURES},
            "failure_counts": {k: failures.get(k, 0) for k in FAILURES},
            "llm_calls_per_question": sum(len(t.llm_calls) for t in traces) / n,
            "prompt_tokens_per_question": sum(t.prompt_tokens for t in traces) / n,
            "uncached_prompt_tokens_per_question": sum(t.uncached_prompt_tokens for t in traces) / n,
            "completion_tokens_per_question": sum(t.completion_tokens for t in traces) / n,
            "kb_calls_per_question": sum(t.kb_calls for t in traces) / n,
            "seconds_per_question": sum(t.seconds for t in traces) / n,
            "wall_s": round(self.wall_s, 2),
            "questions_per_s": round(len(self.scored) / self.wall_s, 3) if self.wall_s else 0.0,
            **self.extra,
        }

    def write(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.json").write_text(json.dumps(self.metrics(), indent=2) + "\n")
        with (out / "questions.jsonl").open("w") as f:
            for s in self.scored:
                f.write(json.dumps(s.row(), ensure_ascii=False) + "\n")


async def evaluate(pipeline: Pipeline, questions: list[GoldQuestion], extender: GoldExtender, *,
                   concurrency: int = 1, progress: Any = None) -> Evaluation:
    """Answers ``questions`` (``concurrency`` at a time) and scores them."""
    gate = asyncio.Semaphore(concurrency)

    async def one(q: GoldQuestion) -> Scored:
        async with gate:
            result = await pipeline.answer(Question(q.id, q.text))
        expected = extender.gold(q)
        s = score({a.answer for a in result.answers}, expected)
        scored = Scored(q, result, expected, s, classify(q, result, s))
        if progress is not None:
            progress(scored)
        return scored

    start = time.perf_counter()
    scored = await asyncio.gather(*(one(q) for q in questions))
    return Evaluation(list(scored), time.perf_counter() - start)
