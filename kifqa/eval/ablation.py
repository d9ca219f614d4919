"""Each rule of the pipeline switched off in turn, beside the defaults: macro F1, questions better and worse, and
model calls per question, on each base (``kifqa ablate``).

Run with the record cache (``llm.cache``): the model's answers the defaults already gave are replayed, so a
variant costs only the requests it changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kifqa.config import Settings
from kifqa.eval.datasets import GoldExtender, GoldQuestion
from kifqa.eval.evaluation import Evaluation
from kifqa.eval.sources import evaluate

#: Each rule, and the pipeline settings that switch it off (everything else as configured).
SWITCHES: dict[str, dict[str, Any]] = {
    "widened": {"widen_known": False},
    "qualified": {"comma_known": False},
    "redraft (all before the choice)": {"redraft_below": None},
    "redraft: offered answer": {"redraft_offered": False},
    "redraft: unasked": {"redraft_unasked": False},
    "redraft: one per name": {"redraft_each": 1},
    "kind": {"redraft_over": None},
    "overruled": {"overrule": False},
    "obvious by lead": {"sure_lead": None},
    "precedent votes (all)": {"precedent_neighbours": 0},
    "meaning ranking": {"rank_relations": "names"},
}


@dataclass(frozen=True)
class Row:
    """One variant on one base, against the defaults on that base."""

    kb: str
    #: The rule switched off (``""``: none, the defaults).
    off: str
    questions: int
    macro_f1: float
    f1_change: float
    #: Questions whose F1 rose or fell against the defaults.
    better: int
    worse: int
    llm_calls: float
    #: Model calls the record cache did not hold (new requests).
    new_calls: int


def _row(kb: str, off: str, evaluation: Evaluation, defaults: Evaluation | None) -> Row:
    f1 = {s.gold.id: s.score.f1 for s in evaluation.scored if s.has_gold}
    base = {s.gold.id: s.score.f1 for s in (defaults or evaluation).scored if s.has_gold}
    calls = [c for s in evaluation.scored for c in s.trace.llm_calls]
    macro = sum(f1.values()) / len(f1) if f1 else 0.0
    base_macro = sum(base.values()) / len(base) if base else 0.0
    return Row(kb=kb, off=off, questions=len(evaluation.scored), macro_f1=round(macro, 4),
               f1_change=round(macro - base_macro, 4), better=sum(f1[q] > base.get(q, 0.0) for q in f1),
               worse=sum(f1[q] < base.get(q, 0.0) for q in f1),
               llm_calls=round(len(calls) / max(1, len(evaluation.scored)), 3),
               new_calls=sum(not c.cache_hit for c in calls))


async def ablated(settings: Settings, questions: list[GoldQuestion], extender: Callable[[Settings], GoldExtender], *,
                  kbs: list[str],
                  switches: dict[str, dict[str, Any]], concurrency: int = 1,
                  progress: Callable[[Row], None] | None = None) -> list[Row]:
    """The defaults, then each of ``switches`` off, on each base of ``kbs``: one row each (the model and each
    base opened once), each handed to ``progress`` as it is done. ``extender`` gives each base's gold (the hard
    base's namesakes extend it)."""
    from kifqa.api import open_pipeline
    from kifqa.pipeline import Pipeline

    rows = []
    for kb in kbs:
        on_kb = settings.override(kb={"spec": kb})
        gold = extender(on_kb)
        async with open_pipeline(settings=on_kb) as defaults:
            baseline = await evaluate(defaults, questions, gold, concurrency=concurrency)
            rows.append(_row(kb, "", baseline, None))
            if progress is not None:
                progress(rows[-1])
            for off, change in switches.items():
                variant = Pipeline(kb=defaults.kb, llm=defaults.llm, examples=defaults.examples,
                                   settings=on_kb.override(pipeline=change).pipeline, vectors=defaults.vectors)
                rows.append(_row(kb, off, await evaluate(variant, questions, gold, concurrency=concurrency),
                                 baseline))
                if progress is not None:
                    progress(rows[-1])
    return rows


def table(rows: list[Row]) -> str:
    """The rows as a markdown table."""
    lines = ["| base | switched off | questions | macro F1 | F1 change | better | worse | LLM calls/q | new calls |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r.kb} | {r.off or '(defaults)'} | {r.questions} | {r.macro_f1:.4f} | {r.f1_change:+.4f} | "
                     f"{r.better} | {r.worse} | {r.llm_calls:.3f} | {r.new_calls} |")
    return "\n".join(lines)
