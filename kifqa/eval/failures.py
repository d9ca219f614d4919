"""Why a question fell short: linking accuracy against the gold triple and the failure classes."""

from __future__ import annotations

from difflib import SequenceMatcher

from kifqa.data.ids import same_id
from kifqa.data.text import normalize
from kifqa.eval.datasets import GoldQuestion
from kifqa.eval.metrics import Score
from kifqa.examples.text import tokens
from kifqa.types import ErrorKind, Trace

#: Failure classes, in the order they are checked.
FAILURES = ("error", "draft", "large", "entity", "relation", "empty", "partial")

#: A wrong answer set larger than this is a failure class of its own (``large``): such a set is no
#: answer to a simple question whatever the step that led to it.
LARGE_ANSWER_SET = 100

#: Linking checks against the gold triple (see :func:`linking`).
LINKING = ("entity", "relation", "property", "triple", "offered")


def linking(gold: GoldQuestion, trace: Trace) -> dict[str, bool | None]:
    """Entity and relation linking against the gold triple (``None`` where the dataset has no gold):

    - ``entity``: the gold topic entity is among the kept entities;
    - ``relation``: a chosen relation has a gold property in its gold direction;
    - ``property``: a chosen relation has a gold property (either direction);
    - ``triple``: one chosen relation has the gold topic, a gold property and its direction;
    - ``offered``: ``relation``, only where one of the relation step's options had a gold property in its
      gold direction (the base holds it for a kept entity): the step's own accuracy.
    """
    chosen = [(r.entity, r.property, r.direction) for r in trace.relations]
    want = gold.relations
    topic = gold.topic

    def rel_ok(p: str, d: str) -> bool:
        return any(same_id(p, g.property) and d == g.direction for g in want)

    return {
        "entity": any(same_id(topic, e) for e in trace.entities) if topic else None,
        "relation": any(rel_ok(p, d) for _, p, d in chosen) if want else None,
        "property": any(same_id(p, g.property) for _, p, _ in chosen for g in want) if want else None,
        "triple": any(same_id(topic, e) and rel_ok(p, d) for e, p, d in chosen) if topic and want else None,
        "offered": (any(rel_ok(p, d) for _, p, d in chosen)
                    if want and any(rel_ok(o.property, o.direction) for o in trace.options) else None),
    }


def resembles(text: str, names: list[str]) -> bool:
    """True when ``text`` is (nearly) one of ``names``: equal, contained, or close in spelling."""
    k = normalize(text)
    if not k:
        return False
    for name in names:
        n = normalize(name)
        if not n:
            continue
        if k == n or (min(len(k), len(n)) >= 3 and (k in n or n in k)):
            return True
        if SequenceMatcher(None, k, n).ratio() >= 0.6:
            return True
        a, b = tokens(k), tokens(n)
        if a and b and len(a & b) / len(a | b) >= 0.5:
            return True
    return False


def failure_of(gold: GoldQuestion, trace: Trace, predicted: set[str], s: Score, *,
               has_gold: bool = True, names: list[str] | None = None) -> tuple[str | None, str | None]:
    """Why a question fell short of F1 = 1, and a detail (``(None, None)`` if it did not).

    Checked in order: ``draft`` (the draft step failed to give a pattern, or the pattern's known
    entity is not the gold topic at all: the unknown is in the wrong place), ``error`` (any other
    error outside the entity and relation steps, or a failed model call: :attr:`ErrorKind.MODEL`), ``large`` (more
    than :data:`LARGE_ANSWER_SET` answers), ``entity`` (the gold
    topic entity is not among the kept entities), ``relation`` (no chosen relation has the gold
    property in the gold direction), ``empty`` (no answer), ``partial`` (answers, but not exactly
    the gold ones). Questions without gold answers (SimpleDBpediaQA) get a class only from the
    trace and the gold triple. ``names`` (the gold topic's names) enable the wrong-unknown check.
    """
    if has_gold and s.f1 >= 1.0:
        return None, None
    step, error = trace.error_step, trace.error
    if trace.error_kind is ErrorKind.MODEL:
        return "error", f"{step}: {error}"
    if step == "draft":
        return "draft", f"malformed: {error}"
    if error and step not in ("entities", "relations"):
        return "error", f"{step}: {error}"
    if len(predicted) > LARGE_ANSWER_SET:
        return "large", f"{len(predicted)} answers, {s.true_positives} right of {s.gold} gold"
    link = linking(gold, trace)
    if gold.topic:
        if not link["entity"]:
            if any(same_id(gold.topic, c.id) for c in trace.candidates):
                return "entity", "found by the search but not kept"
            known = trace.draft[0].known if trace.draft else ""
            if known and names and not resembles(known, names):
                return "draft", f"wrong unknown: drafted {known!r} as the known entity, gold topic is {names[0]!r}"
            return "entity", f"not found{f' for {known!r}' if known else ''}" + (f" ({error})" if error else "")
    elif step == "entities":
        return "entity", str(error)
    if gold.relations:
        if not link["relation"]:
            chosen = ", ".join(f"{r.property} {r.direction}" for r in trace.relations) or "none"
            if link["property"]:
                return "relation", f"wrong direction (chose {chosen})"
            return "relation", f"wrong property (chose {chosen})" + (f"; {error}" if error else "")
    elif step == "relations":
        return "relation", str(error)
    if not predicted:
        return "empty", str(error) if error else "the filters gave no statement"
    if has_gold:
        return "partial", f"{s.true_positives} right of {s.predicted} predicted, {s.gold} gold"
    return None, None


def detail_kind(detail: str | None) -> str:
    """The kind of a failure detail, without its particulars (``wrong property (chose P1 ...)`` →
    ``wrong property``)."""
    if not detail:
        return ""
    return detail.split(" (")[0].split(":")[0].split(";")[0].strip()
