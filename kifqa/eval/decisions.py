"""How often each rule of the pipeline fired, changed the outcome, and helped or hurt (:class:`~kifqa.types.Decision`).

A taken decision that put relations in place of others helped where the relations it chose have a gold property in
its gold direction and those it put aside have none, and hurt the other way round; a decision that put nothing
aside (a widened name, a constraint) is counted as fired and taken only. The relations put aside are what the rule
replaced, not a run without the rule: the ablation (each rule switched off in turn) measures that.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kifqa.data.ids import same_id
from kifqa.eval.datasets import GoldQuestion
from kifqa.types import Relation, Rule, Trace


def _gold(gold: GoldQuestion, relations: Sequence[Relation]) -> bool:
    return any(same_id(r.property, g.property) and r.direction == g.direction for r in relations
               for g in gold.relations)


def decision_counts(scored: Iterable[tuple[GoldQuestion, Trace]]) -> dict[str, dict[str, Any]]:
    """For each rule that fired: ``fired``, ``taken`` (changed the outcome), and of the taken ones that chose
    between relations, with gold relations to tell by, ``helped`` and ``hurt``."""
    counts: dict[str, dict[str, Any]] = {}
    for gold, trace in scored:
        for d in trace.decisions:
            c = counts.setdefault(d.rule.value, {"fired": 0, "taken": 0, "judged": 0, "helped": 0, "hurt": 0})
            c["fired"] += 1
            c["taken"] += d.taken
            if not (d.taken and d.chosen and d.instead and gold.relations):
                continue
            chosen, instead = _gold(gold, d.chosen), _gold(gold, d.instead)
            c["judged"] += 1
            c["helped"] += chosen and not instead
            c["hurt"] += instead and not chosen
    return {rule.value: counts[rule.value] for rule in Rule if rule.value in counts}
