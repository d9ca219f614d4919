"""The oracle-draft diagnostic: the pipeline given each question's gold draft, and where the loss is.

The gold draft is the gold triple written as the example pool writes it
(:func:`kifqa.data.pool.gold_draft`). Answering the same questions with the model's drafts
and with the gold ones splits the loss of macro F1 (1 − F1) by step: ``draft`` is what the gold
draft gains (oracle F1 − normal F1); the rest is the oracle run's own shortfall by failure class:
``entity``, ``relation``, ``answers`` (``empty``, ``partial`` and ``large``) and
``other`` (``error``, and ``draft`` when even the gold draft did not go through). The parts add up to
1 − normal F1.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kifqa.data.pool import gold_draft
from kifqa.eval.datasets import GoldExtender, GoldQuestion

if TYPE_CHECKING:
    from kifqa.eval.evaluation import Evaluation

#: Loss parts of the oracle run, by its failure classes.
_PARTS = {"entity": "entity", "relation": "relation", "empty": "answers",
          "partial": "answers", "large": "answers", "error": "other", "draft": "other"}


def gold_drafts(questions: list[GoldQuestion], extender: GoldExtender) -> dict[str, str]:
    """Question id → gold draft, for the questions with a SimpleQuestions-Wikidata-style gold triple
    (topic and ``Pn``/``Rn``) whose topic and property have labels."""
    out = {}
    for q in questions:
        if not (q.sqwd_style and q.topic):
            continue
        names = extender.names(q.topic)
        label = extender.property_label(q.pid)
        if names and label and label != q.pid:
            out[q.id] = gold_draft(q.text, names, label, inverse=q.inverse)
    return out


def loss_by_step(normal: Evaluation, oracle: Evaluation) -> dict[str, Any]:
    """Macro F1 with the model's and with the gold drafts on the questions both scored with gold
    answers, and 1 − F1 split by step (the parts add up to it)."""
    given = {s.gold.id: s for s in oracle.scored if s.has_gold}
    pairs = [(s, given[s.gold.id]) for s in normal.scored if s.has_gold and s.gold.id in given]
    n = len(pairs)
    if not n:
        return {"questions": 0}
    f1 = sum(a.score.f1 for a, _ in pairs) / n
    f1_oracle = sum(b.score.f1 for _, b in pairs) / n
    loss = {"draft": f1_oracle - f1, "entity": 0.0, "relation": 0.0, "answers": 0.0, "other": 0.0}
    for _, b in pairs:
        if b.failure:
            loss[_PARTS[b.failure]] += (1.0 - b.score.f1) / n
    return {"questions": n, "macro_f1": round(f1, 4), "macro_f1_oracle_drafts": round(f1_oracle, 4),
            "loss": {k: round(v, 4) for k, v in loss.items()},
            "oracle_failure_counts": dict(Counter(b.failure for _, b in pairs if b.failure))}
