"""The report page's data: table columns, trace records, the candidates it shows, changed questions
of a comparison, a run folder's figures, and the self-contained page (blobs that unpack to the data,
no external resource)."""

from __future__ import annotations

import base64
import gzip
import json
import re

import pyarrow as pa

from kifqa.report.data import ANSWERS, CANDIDATES, compare_table, prediction_row, question_table
from kifqa.report.page import CHUNK, render_page
from kifqa.report.sources import load_folder
from kifqa.runs import ANSWER_SCHEMA, TRACE_SCHEMA, Prediction, RunFolder
from kifqa.types import LLMCall, Trace


def _trace(qid: str, n_candidates: int = 3, kept: tuple[str, ...] = ("Q0",), error: str | None = None) -> Trace:
    return Trace.from_dict({"question_id": qid, "question": f"question {qid}", "draft_output": qid, "error": error,
            "error_step": "draft" if error else None,
            "candidates": [{"id": f"Q{i}", "label": f"L{i}", "score": 10.0 - i} for i in range(n_candidates)],
            "entities": list(kept), "timings": {"draft": 0.123456, "total": 1.0}, "llm_calls": [{"step": "draft"}]})


def _unpack(blob: str) -> object:
    return json.loads(gzip.decompress(base64.b64decode(blob)))


def test_rows_without_gold_get_error_or_empty_and_columns_line_up() -> None:
    rows = [prediction_row(Prediction(question_id="a", answers={"Q1": "One"}, trace=_trace("a"))),
            prediction_row(Prediction(question_id="b", answers={}, trace=_trace("b"))),
            prediction_row(Prediction(question_id="c", answers={}, trace=_trace("c", error="bad")), confidence=0.5)]
    columns, records = question_table(rows)
    assert columns["id"] == ["a", "b", "c"] and columns["failure"] == [None, "empty", "error"]
    assert columns["answers"] == [[["Q1", "One"]], [], []] and columns["f1"] == [None, None, None]
    assert columns["confidence"] == [None, None, 0.5] and columns["error_step"] == [None, None, "draft"]
    assert columns["t_draft"] == [0.1235] * 3 and columns["llm_calls"] == [1, 1, 1]
    assert all(len(v) == 3 for v in columns.values())
    assert records[0]["gold"] is None and records[0]["trace"]["candidates"][0]["id"] == "Q0"
    assert records[0]["more_answers"] == [] and records[0]["trace"]["timings"]["draft"] == 0.1235
    assert "question" not in records[0]["trace"], "the question is a table column"


def test_a_table_row_shows_the_first_answers_and_an_opened_question_all() -> None:
    answers = {f"Q{i}": f"L{i}" for i in range(ANSWERS + 7)}
    columns, [record] = question_table([prediction_row(Prediction(question_id="a", answers=answers, trace=_trace("a")))])
    assert columns["answers"] == [[[f"Q{i}", f"L{i}"] for i in range(ANSWERS)]]
    assert columns["n_answers"] == [ANSWERS + 7] and record["more_answers"] == [[f"Q{i}", f"L{i}"]
                                                                               for i in range(ANSWERS, ANSWERS + 7)]


def test_blank_node_labels_are_numbered_in_each_query() -> None:
    row = prediction_row(Prediction(question_id="a", answers={}, trace=_trace("a")))
    row["trace"]["filters"] = [{"sparql": "SELECT ?v { ?s ?p _:N9f3a . _:Nab12 ?q _:N9f3a }", "seconds": 0.123456},
                               {"sparql": "SELECT ?v { ?s ?p _:Nc0de }"}]
    [record] = question_table([row])[1]
    assert [f["sparql"] for f in record["trace"]["filters"]] == [
        "SELECT ?v { ?s ?p _:b0 . _:b1 ?q _:b0 }", "SELECT ?v { ?s ?p _:b0 }"]
    assert record["trace"]["filters"][0]["seconds"] == 0.1235


def test_an_opened_question_shows_the_first_candidates_and_every_kept_one() -> None:
    late = f"Q{CANDIDATES + 5}"
    row = prediction_row(Prediction(question_id="a", answers={}, trace=_trace("a", n_candidates=40, kept=("Q1", late))))
    [record] = question_table([row])[1]
    shown = [c["id"] for c in record["trace"]["candidates"]]
    assert shown == [f"Q{i}" for i in range(CANDIDATES)] + [late]
    assert record["trace"]["candidates_total"] == 40
    assert len(row["trace"]["candidates"]) == 40, "the row's own trace is left whole"


def test_compare_keeps_only_changed_questions_side_by_side() -> None:
    def scored(qid: str, f1: float, failure: str | None, answers: dict[str, str]) -> dict:
        return {"id": qid, "question": qid, "labels": answers, "scored": True, "f1": f1, "failure": failure,
                "gold": ["Q1"], "trace": _trace(qid).to_dict()}

    a = {"same": scored("same", 1.0, None, {"Q1": "x"}), "up": scored("up", 0.0, "entity", {}),
         "moved": scored("moved", 0.0, "partial", {"Q2": "y"})}
    b = {"same": scored("same", 1.0, None, {"Q1": "x"}), "up": scored("up", 1.0, None, {"Q1": "x"}),
         "moved": scored("moved", 0.0, "partial", {"Q3": "z"}), "new": scored("new", 1.0, None, {})}
    columns, records = compare_table(a, b, better={"up"}, worse=set())
    assert columns["id"] == ["up", "moved"] and columns["change"] == ["better", "changed"]
    assert columns["a_failure"] == ["entity", "partial"] and columns["b_f1"] == [1.0, 0.0]
    assert records[1]["a"]["trace"]["draft_output"] == "moved" and set(records[1]) == {"a", "b"}


def test_the_page_is_self_contained_and_its_blobs_unpack_to_the_data() -> None:
    rows = [prediction_row(Prediction(question_id=f"q{i}", answers={}, trace=_trace(f"q{i}"))) for i in range(CHUNK + 3)]
    columns, records = question_table(rows)
    html = render_page(title="t <b>", about="a", summary={"questions": len(rows)}, columns=columns, records=records)
    assert "<title>t &lt;b&gt;</title>" in html
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", html), "nothing is loaded from elsewhere"
    assert "sourceMappingURL" not in html and "Permission is hereby granted" in html  # the MIT licences
    data = _unpack(re.search(r'id="data">([^<]+)<', html).group(1))
    assert data["n"] == CHUNK + 3 and data["columns"]["id"] == columns["id"] and data["chunk"] == CHUNK
    chunks = re.findall(r'class="traces" data-chunk="(\d+)">([^<]+)<', html)
    assert [k for k, _ in chunks] == ["0", "1"]
    assert _unpack(chunks[1][1]) == json.loads(json.dumps(records[CHUNK:]))  # as JSON: tuples become lists
    assert "window.Chart" in gzip.decompress(base64.b64decode(re.search(r'id="lib-chart">([^<]+)<', html).group(1))).decode()


def test_a_run_folder_s_figures_come_from_its_traces_and_its_manifest(tmp_path) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.create()
    traces = [Trace("q1", "where was x born", llm_calls=[LLMCall(step="draft", prompt_tokens=10)], timings={"total": 2.0}),
              Trace("q2", "?!", error="empty question", error_step="input")]
    folder.write_shard(0, pa.Table.from_pylist([], schema=ANSWER_SCHEMA),
                       pa.Table.from_pylist([t.to_row() for t in traces], schema=TRACE_SCHEMA))
    folder.write_manifest({"config": {"llm": {"model": "m"}, "kb": {"spec": "local"}},
                           "summary": {"seconds": 3.0, "questions_per_s": 0.67}})
    summary, rows, kind = load_folder(folder.root)
    assert kind == "run" and [r["failure"] for r in rows] == ["empty", "error"]
    assert (summary["questions"], summary["answered"], summary["errors"]) == (2, 0, 1)
    assert summary["llm_calls_per_question"] == 0.5 and summary["prompt_tokens_per_question"] == 5
    assert (summary["model"], summary["kb"], summary["wall_s"]) == ("m", "local", 3.0)
    assert summary["job"]["questions_per_s"] == 0.67
