"""Silver data: the confidence formula on hand-made traces, and the Parquet/JSONL files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kifqa.eval.silver import (
    SILVER_SCHEMA,
    answer_factor,
    build_silver,
    confidence,
    constraint_factor,
    entity_factor,
    relation_factor,
    write_silver,
)
from kifqa.runs import Prediction
from kifqa.types import Trace


def cand(cid: str, label: str, score: float, aliases: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"id": cid, "label": label, "aliases": list(aliases), "description": "", "score": score}


def trace(known: str = "sasha vujačić", *, candidates: list[dict[str, Any]] | None = None,
          relations: list[tuple[str, str, str]] | None = None, options: int = 1, model_pick: str | None = None,
          constraints: list[tuple[str, str, str]] = (), outcomes: list[str] = (), truncated: bool = False,
          error: str | None = None, error_step: str = "answers") -> Trace:
    candidates = candidates if candidates is not None else [cand("Q318926", "Sasha Vujačić", 3.9),
                                                             cand("Q1292790", "Sasha", 1.75)]
    relations = relations if relations is not None else [("Q318926", "P19", "forward")]
    calls = [{"step": "draft", "output": "..."}]
    if model_pick is not None:
        calls.append({"step": "relations", "output": model_pick})
    return Trace.from_dict({
        "question_id": "t", "question": "where was sasha vujačić born", "kb": "local", "model": "m",
        "draft": [{"subject": known, "predicate": "place of birth", "object": "?x"}]
        + [dict(zip(("subject", "predicate", "object"), c)) for c in constraints],
        "candidates": candidates,
        "entities": [c["id"] for c in candidates[:1]],
        "options": [{"entity": "Q318926", "property": f"P{19 + i}", "direction": "forward"} for i in range(options)],
        "relations": [dict(zip(("entity", "property", "direction"), r)) for r in relations],
        "filters": [{"relation": {"entity": "Q318926", "property": "P19", "direction": "forward"}, "filter": "Filter(...)", "sparql": "SELECT ?x WHERE { }", "n_statements": 1,
                     "seconds": 0.1, "truncated": truncated}],
        "constraints": [{"constraint": dict(zip(("subject", "predicate", "object"), c)), "result": r, "kept": 1,
                         "of": 3} for c, r in zip(constraints, outcomes)],
        "llm_calls": calls, "error": error, "error_step": error_step if error else None,
    })


def test_exact_unique_link_and_only_option_is_certain() -> None:
    c = confidence(trace(), 1)
    assert (c.entity, c.relation, c.constraints, c.answers, c.value) == (1.0, 1.0, 1.0, 1.0, 1.0)


def test_entity_factor() -> None:
    # namesakes: two exactly named entities both used -> 1/2; one used of two -> 0.9
    twins = [cand("Q1", "James Brown", 3.9), cand("Q2", "James Brown", 3.9), cand("Q3", "James", 1.0)]
    assert entity_factor(trace("james brown", candidates=twins,
                               relations=[("Q1", "P19", "forward"), ("Q2", "P19", "forward")])) == 0.5
    assert entity_factor(trace("james brown", candidates=twins, relations=[("Q1", "P19", "forward")])) == 0.9
    # an alias counts as an exact name
    alias = [cand("Q7", "Wiebke Carolsfeld", 3.9, ("wiebke von carolsfeld",))]
    assert entity_factor(trace("wiebke von carolsfeld", candidates=alias, relations=[("Q7", "P57", "backward")])) == 1.0
    # near matches: 0.5 + 0.4 × relative margin over the best other candidate
    near = [cand("Q7", "Wiebke Carolsfeld", 2.0), cand("Q8", "Margarethe von Trotta", 1.0)]
    assert entity_factor(trace("wiebke von carolsfeld", candidates=near,
                               relations=[("Q7", "P57", "backward")])) == pytest.approx(0.5 + 0.4 * 0.5)
    close = [cand("Q7", "Wiebke Carolsfeld", 1.9), cand("Q8", "Von Hayes", 1.88)]
    assert entity_factor(trace("wiebke von carolsfeld", candidates=close,
                               relations=[("Q7", "P57", "backward")])) == pytest.approx(0.5 + 0.4 * 0.02 / 1.9)


def test_relation_factor() -> None:
    assert relation_factor(trace(options=1)) == 1.0
    assert relation_factor(trace(options=4)) == 0.9  # named exactly by the draft: no model call
    assert relation_factor(trace(options=4, model_pick="1")) == 0.75
    assert relation_factor(trace(options=4, model_pick="3")) == 0.5
    assert relation_factor(trace(relations=[])) == 0.0


def test_constraint_factor() -> None:
    portugal = [("?x", "country", "portugal")]
    assert constraint_factor(trace()) == 1.0
    assert constraint_factor(trace(constraints=portugal, outcomes=["applied"])) == 1.0
    assert constraint_factor(trace(constraints=portugal, outcomes=["unmet"])) == 0.5
    assert constraint_factor(trace(constraints=portugal, outcomes=["unresolved"])) == 0.75
    assert constraint_factor(trace(constraints=portugal * 2, outcomes=["applied", "unmet"])) == 0.5
    # a trace written before constraint outcomes were recorded
    assert constraint_factor(trace(constraints=portugal)) == 0.75
    # the outcome, not the notes, decides: a note that reads like one counts for nothing
    noted = trace(constraints=portugal)
    noted.notes.append("constraint (?x | country | portugal): kept 1 of 3 answers")
    assert constraint_factor(noted) == 0.75


def test_answer_factor() -> None:
    t = trace()
    assert [round(answer_factor(t, n), 3) for n in (0, 1, 2, 4, 16)] == [0.0, 1.0, 0.667, 0.5, 0.333]
    assert answer_factor(trace(truncated=True), 1) == 0.5


def test_errors_and_empty_answers_have_no_confidence() -> None:
    assert confidence(trace(error="KBError: boom"), 1).value == 0.0
    assert confidence(trace(), 0).value == 0.0


def test_confidence_orders_plausibly() -> None:
    certain = confidence(trace(), 1).value
    model_picked = confidence(trace(options=5, model_pick="2"), 1).value
    many = confidence(trace(), 12).value
    assert 0.0 < model_picked < certain and 0.0 < many < certain
    assert all(0.0 <= x <= 1.0 for x in (certain, model_picked, many))


def predictions() -> list[Prediction]:
    return [
        Prediction(question_id="q1", answers={"Q1010": "Maribor"}, trace=trace(), property_labels={"P19": "place of birth"}),
        Prediction(question_id="q2", answers={"Q1": "one", "Q2": "two"}, trace=trace(options=3, model_pick="2"), property_labels={"P19": "place of birth"}),
        Prediction(question_id="q3", answers={}, trace=trace(relations=[])),
        Prediction(question_id="q4", answers={}, trace=trace(error="no entity found", error_step="entities")),
    ]


def test_build_silver_rows_and_summary() -> None:
    rows, summary = asyncio.run(build_silver(predictions(), None))
    assert [r["id"] for r in rows] == ["q1", "q2"]
    r = rows[0]
    assert r["logical_form"] == "(Q318926 | P19 | ?x)" and r["answers"] == ["Q1010"] and r["answer_labels"] == ["Maribor"]
    assert r["relations"] == [{"entity": "Q318926", "entity_label": "Sasha Vujačić", "property": "P19",
                               "property_label": "place of birth", "direction": "forward"}]
    assert r["kif_sparql"] == ["SELECT ?x WHERE { }"] and r["kif_filter"] == ["Filter(...)"]
    assert r["query"].endswith("SELECT DISTINCT ?x WHERE { wd:Q318926 wdt:P19 ?x . }")
    assert r["confidence"] == 1.0 and rows[1]["confidence"] == pytest.approx(0.5 / (1 + 0.5), abs=1e-4)
    assert (summary.questions, summary.rows, summary.no_answer, summary.errors) == (4, 2, 2, 1)
    assert summary.bands == {"0.00-0.25": 0, "0.25-0.50": 1, "0.50-0.75": 0, "0.75-1.00": 1}
    rows, summary = asyncio.run(build_silver(predictions(), None, min_confidence=0.5))
    assert [r["id"] for r in rows] == ["q1"] and summary.below_threshold == 1


def test_files_read_back_with_pyarrow_and_pandas(tmp_path: Path) -> None:
    rows, summary = asyncio.run(build_silver(predictions(), None))
    parquet, jsonl = write_silver(rows, tmp_path, summary)
    table = pq.read_table(parquet)
    assert table.schema.equals(SILVER_SCHEMA) and table.num_rows == 2
    assert table.column("confidence").to_pylist() == [r["confidence"] for r in rows]
    assert table.column("relations").to_pylist()[0][0]["property"] == "P19"
    lines = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert lines == table.to_pylist()
    assert json.loads((tmp_path / "silver-summary.json").read_text())["rows"] == 2
    pd = pytest.importorskip("pandas")
    frame = pd.read_parquet(parquet)
    assert list(frame["id"]) == ["q1", "q2"] and list(frame.columns) == SILVER_SCHEMA.names
    assert list(pd.read_json(jsonl, lines=True)["logical_form"]) == list(frame["logical_form"])


def test_empty_silver_is_still_a_readable_table(tmp_path: Path) -> None:
    parquet, _ = write_silver([], tmp_path)
    assert pq.read_table(parquet).schema.equals(SILVER_SCHEMA)
