"""Silver KBQA data from unlabelled questions: each answered question with the logical form the
pipeline chose (triple pattern with ids), its query in the field's form (``query``: one ``SELECT`` over the
base's truthy triples, :mod:`kifqa.kb.fieldform`) with KIF's filter and compiled SPARQL beside it, its answers with
labels, and a confidence in [0, 1] derived from the trace (see :func:`confidence` and docs/eval.md). A row is
kept only where its query, executed again against the base, gives exactly its answers (:func:`keep_reproduced`).

Written as ``silver.parquet`` (:data:`SILVER_SCHEMA`) and ``silver.jsonl`` (the same rows), which
pandas and ``datasets.load_dataset("parquet", data_files=...)`` read; :mod:`kifqa.eval.release` makes a
publishable dataset folder of them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from kifqa.data.text import normalize
from kifqa.eval.reexecute import reexecute
from kifqa.kb.base import KnowledgeBase
from kifqa.kb.fieldform import field_query
from kifqa.runs import Prediction
from kifqa.types import UNKNOWN, Candidate, ConstraintResult, LLMCall, Relation, Trace

#: Entity factor when namesakes of the chosen entity were dropped by the relation evidence.
NAMESAKES_DROPPED = 0.9
#: Entity factor range of a near (not exact) name match: NEAR_BASE + NEAR_MARGIN × margin.
NEAR_BASE, NEAR_MARGIN = 0.5, 0.4
#: Relation factors: the only option; named exactly by the draft; picked by the model (the
#: lexically best option / another one).
ONLY_OPTION, NAMED_OPTION, MODEL_TOP, MODEL_OTHER = 1.0, 0.9, 0.75, 0.5
#: Constraint factors: met by some answers; not met by any; not resolvable; no outcome recorded.
CONSTRAINT_MET, CONSTRAINT_UNMET, CONSTRAINT_UNRESOLVED, CONSTRAINT_UNKNOWN = 1.0, 0.5, 0.75, 0.75
#: Answer-set factor 1 / (1 + ANSWER_DECAY × log2 n); halved when a filter was truncated.
ANSWER_DECAY = 0.5

_RELATION = pa.struct([("entity", pa.string()), ("entity_label", pa.string()), ("property", pa.string()),
                       ("property_label", pa.string()), ("direction", pa.string())])

SILVER_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("question", pa.string()),
    ("draft", pa.list_(pa.string())),
    ("logical_form", pa.string()),
    ("query", pa.string()),
    ("relations", pa.list_(_RELATION)),
    ("constraints", pa.list_(pa.string())),
    ("kif_filter", pa.list_(pa.string())),
    ("kif_sparql", pa.list_(pa.string())),
    ("answers", pa.list_(pa.string())),
    ("answer_labels", pa.list_(pa.string())),
    ("n_answers", pa.int32()),
    ("confidence", pa.float64()),
    ("confidence_entity", pa.float64()),
    ("confidence_relation", pa.float64()),
    ("confidence_constraints", pa.float64()),
    ("confidence_answers", pa.float64()),
    ("notes", pa.list_(pa.string())),
    ("kb", pa.string()),
    ("model", pa.string()),
])


@dataclass(frozen=True)
class Confidence:
    """The factors of a question's confidence and their product."""

    entity: float
    relation: float
    constraints: float
    answers: float

    @property
    def value(self) -> float:
        return round(self.entity * self.relation * self.constraints * self.answers, 4)


#: The constraint factor of each outcome.
_CONSTRAINT_FACTORS = {ConstraintResult.APPLIED: CONSTRAINT_MET, ConstraintResult.UNMET: CONSTRAINT_UNMET,
                       ConstraintResult.UNRESOLVED: CONSTRAINT_UNRESOLVED}


def _names(candidate: Candidate) -> list[str]:
    return [candidate.label, *candidate.aliases]


def entity_factor(trace: Trace) -> float:
    """1 / m when the m entities the chosen relations use are named exactly by the draft (× 0.9 if
    other exactly named entities were dropped); for a near match 0.5 + 0.4 × the search-score
    margin between the best used candidate and the best other one (relative to the former)."""
    used = used_entities(trace)
    if not used:
        return 0.0
    exact_ids = exactly_named(trace)
    if all(e in exact_ids for e in used):
        factor = 1.0 / len(used)
        return factor * (NAMESAKES_DROPPED if len(exact_ids) > len(used) else 1.0)
    return (NEAR_BASE + NEAR_MARGIN * search_margin(trace)) / len(used)


def used_entities(trace: Trace) -> list[str]:
    """The entities the chosen relations use, in order."""
    return list(dict.fromkeys(r.entity for r in trace.relations))


def exactly_named(trace: Trace) -> set[str]:
    """The candidates a label or alias of which is the draft's known end (normalized)."""
    known = normalize(trace.draft[0].known) if trace.draft else ""
    return {c.id for c in trace.candidates if known and any(normalize(n) == known for n in _names(c))}


def search_margin(trace: Trace) -> float:
    """How far the best used candidate's search score leads the best other candidate's, relative to the former
    (in [0, 1]; 0 where it does not lead or has no score)."""
    used = set(used_entities(trace))
    by_id = {c.id: c for c in trace.candidates}
    s_used = max((by_id[e].score for e in used if e in by_id), default=0.0)
    s_other = max((c.score for c in trace.candidates if c.id not in used), default=0.0)
    return min(1.0, max(0.0, (s_used - s_other) / s_used)) if s_used > 0 else 0.0


def relation_factor(trace: Trace) -> float:
    """1 for the only option, 0.9 for an option the draft's predicate names exactly (taken without
    the model), 0.75 when the model picked the lexically best option, 0.5 when it picked another."""
    by = relation_chosen_by(trace)
    if by is None:
        return 0.0
    if by != "model":
        return ONLY_OPTION if by == "only" else NAMED_OPTION
    return MODEL_TOP if model_took_first(trace) else MODEL_OTHER


#: How the relation was chosen: the only option; by a rule, without the model (the option the draft names
#: exactly, the precedent votes, an obvious lead); by the model.
ChosenBy = Literal["only", "rule", "model"]


def relation_chosen_by(trace: Trace) -> ChosenBy | None:
    """How the trace's relation was chosen (``None``: no relation was)."""
    if not trace.relations:
        return None
    if relation_call(trace) is not None:
        return "model"
    return "only" if len({(o.property, o.direction) for o in trace.options}) <= 1 else "rule"


def relation_call(trace: Trace) -> LLMCall | None:
    """The model call that chose the relation (the last of the relations step), if the model chose it."""
    return next((c for c in reversed(trace.llm_calls) if c.step == "relations"), None)


def model_took_first(trace: Trace) -> bool:
    """Whether the model chose the first (the lexically best) option."""
    call = relation_call(trace)
    return call is not None and call.output.strip().rstrip(".") == "1"


def constraint_factor(trace: Trace) -> float:
    """The product over the draft's constraint patterns: 1 when some answers met it, 0.5 when none
    did (not applied), 0.75 when it could not be resolved or has no recorded outcome (a trace
    written before :attr:`~kifqa.types.Trace.constraints`); 1 with no constraint."""
    factor = 1.0
    for i in range(len(trace.draft[1:])):
        outcome = trace.constraints[i] if i < len(trace.constraints) else None
        factor *= CONSTRAINT_UNKNOWN if outcome is None else _CONSTRAINT_FACTORS[outcome.result]
    return factor


def answer_factor(trace: Trace, n_answers: int) -> float:
    """1 / (1 + 0.5 log2 n) for n answers (1 → 1, 2 → 0.67, 4 → 0.5, 16 → 0.33); halved when a
    filter's result may have been cut short; 0 for no answer."""
    if n_answers <= 0:
        return 0.0
    factor = 1.0 / (1.0 + ANSWER_DECAY * math.log2(n_answers))
    if any(f.truncated for f in trace.filters):
        factor *= 0.5
    return factor


def confidence(trace: Trace, n_answers: int) -> Confidence:
    """A question's confidence factors; all 0 when the trace has an error or there is no answer."""
    if trace.error or n_answers <= 0:
        return Confidence(0.0, 0.0, 0.0, 0.0)
    return Confidence(round(entity_factor(trace), 4), round(relation_factor(trace), 4),
                      round(constraint_factor(trace), 4), round(answer_factor(trace, n_answers), 4))


@dataclass(frozen=True)
class Rater:
    """How a row's confidence is computed from its trace and answer count, and what says so (``method``)."""

    rate: Callable[[Trace, int], float]
    method: str


#: The hand-set product of :func:`confidence`'s four factors.
PRODUCT = Rater(lambda trace, n: confidence(trace, n).value, "hand-set product of four factors")


def logical_form(rels: Iterable[Relation]) -> str:
    """The chosen relations as triple patterns with ids, joined by ``UNION``."""
    return " UNION ".join(f"({r.entity} | {r.property} | {UNKNOWN})" if r.direction == "forward"
                          else f"({UNKNOWN} | {r.property} | {r.entity})" for r in rels)


def query_of(trace: Trace) -> str:
    """The field-form query of the trace's chosen relations and applied constraints (``""`` where an id cannot
    be written in one)."""
    constraints = [c.relations for c in trace.constraints if c.result is ConstraintResult.APPLIED]
    try:
        return field_query(trace.relations, constraints)
    except ValueError:
        return ""


def silver_row(p: Prediction, rater: Rater = PRODUCT) -> dict[str, Any]:
    """One row of :data:`SILVER_SCHEMA`: its ``confidence`` by ``rater``, beside the hand-set factors."""
    t = p.trace
    labels = {c.id: c.label for c in t.candidates}
    c = confidence(t, len(p.answers))
    return {
        "id": p.question_id,
        "question": t.question,
        "draft": [str(x) for x in t.draft],
        "logical_form": logical_form(t.relations),
        "query": query_of(t),
        "relations": [{"entity": r.entity, "entity_label": labels.get(r.entity, ""), "property": r.property,
                       "property_label": p.property_labels.get(r.property, ""), "direction": r.direction}
                      for r in t.relations],
        "constraints": [str(x) for x in t.draft[1:]],
        "kif_filter": [f.filter for f in t.filters],
        "kif_sparql": [f.sparql for f in t.filters],
        "answers": list(p.answers),
        "answer_labels": [p.answers[a] or "" for a in p.answers],
        "n_answers": len(p.answers),
        "confidence": rater.rate(t, len(p.answers)),
        "confidence_entity": c.entity,
        "confidence_relation": c.relation,
        "confidence_constraints": c.constraints,
        "confidence_answers": c.answers,
        "notes": [*t.notes, *map(str, t.constraints)],
        "kb": t.kb,
        "model": t.model,
    }


@dataclass
class SilverSummary:
    questions: int
    rows: int
    no_answer: int
    errors: int
    below_threshold: int
    mean_confidence: float
    #: Rows by confidence band: ``[0.0, 0.25)``, ``[0.25, 0.5)``, ``[0.5, 0.75)``, ``[0.75, 1.0]``.
    bands: dict[str, int]
    #: The calibration run's threshold for a target precision (``kifqa silver --target-precision``).
    calibration: dict[str, Any] | None = None
    #: Rows left out because their query, executed again, did not give exactly their answers.
    not_reproduced: int = 0
    #: How the confidence was computed (:attr:`Rater.method`).
    confidence: str = PRODUCT.method

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        bands = ", ".join(f"{k}: {v}" for k, v in self.bands.items())
        text = (f"questions {self.questions}: {self.rows} silver rows, {self.no_answer} without answer "
                f"({self.errors} errors), {self.below_threshold} below the confidence threshold, "
                f"{self.not_reproduced} whose query did not reproduce its answers\n"
                f"confidence ({self.confidence}) mean {self.mean_confidence:.3f}; by band {bands}")
        if c := self.calibration:
            text += (f"\nthreshold {c['threshold']} for precision {c['target_precision']} ({c['source']}): measured "
                     f"precision {c['precision']} at coverage {c['coverage']} ({c['n']} of {c['questions']} "
                     "questions)")
        return text


async def build_silver(predictions: Iterable[Prediction], kb: KnowledgeBase | None, *, min_confidence: float = 0.0,
                       rater: Rater = PRODUCT) -> tuple[list[dict[str, Any]], SilverSummary]:
    """Silver rows of the answered questions whose confidence (by ``rater``) is at least ``min_confidence`` and
    whose query, executed again on ``kb``, gives exactly their answers (``None``: not executed again, every row
    kept)."""
    rows, n, no_answer, errors, below = [], 0, 0, 0, 0
    for p in predictions:
        n += 1
        if not p.answers or p.trace.error:
            no_answer += 1
            errors += bool(p.trace.error)
            continue
        row = silver_row(p, rater)
        if row["confidence"] < min_confidence:
            below += 1
            continue
        rows.append(row)
    answered = len(rows)
    if kb is not None:
        checks = await reexecute(kb, [(r["query"], r["answers"]) for r in rows])
        rows = [r for r, check in zip(rows, checks) if r["query"] and check.reproduced]
    bands = {"0.00-0.25": 0, "0.25-0.50": 0, "0.50-0.75": 0, "0.75-1.00": 0}
    for r in rows:
        bands[list(bands)[min(3, int(r["confidence"] * 4))]] += 1
    mean = sum(r["confidence"] for r in rows) / len(rows) if rows else 0.0
    return rows, SilverSummary(n, len(rows), no_answer, errors, below, round(mean, 4), bands,
                               not_reproduced=answered - len(rows), confidence=rater.method)


def write_silver(rows: list[dict[str, Any]], out: Path, summary: SilverSummary | None = None) -> tuple[Path, Path]:
    """``silver.parquet`` and ``silver.jsonl`` (and ``silver-summary.json``) in ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    parquet, jsonl = out / "silver.parquet", out / "silver.jsonl"
    pq.write_table(pa.Table.from_pylist(rows, schema=SILVER_SCHEMA), parquet)
    with jsonl.open("w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    if summary is not None:
        (out / "silver-summary.json").write_text(json.dumps(summary.as_dict(), indent=2) + "\n")
    return parquet, jsonl
