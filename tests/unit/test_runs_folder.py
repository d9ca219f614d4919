"""The output folder: atomic shard files, finished and failed shards, the summary's counts."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from kifqa.batch.summary import COLUMNS, trace_counts
from kifqa.llm.routing import LeastLoaded
from kifqa.runs import ANSWER_SCHEMA, TRACE_SCHEMA, RunFolder
from kifqa.types import Answer, Fact, Question, Result, Trace


def _result(qid: str, *, answers: int = 1, error: str | None = None, step: str | None = None) -> Result:
    trace = Trace(qid, f"question {qid}", kb="local", model="m", kb_calls=3, n_answers=answers,
                  error=error, error_step=step)
    facts = [Fact(subject="Q1", subject_label="one", property="P19", property_label="born in", value=f"Q{i + 2}", value_label="x") for i in range(answers)]
    return Result(Question(qid, f"question {qid}"), [Answer(fact=f, answer=f.value, answer_label=f.value_label) for f in facts], trace)


def _tables(results: list[Result]) -> tuple[pa.Table, pa.Table]:
    return (pa.Table.from_pylist([row for r in results for row in r.answer_rows()], schema=ANSWER_SCHEMA),
            pa.Table.from_pylist([r.trace.to_row() for r in results], schema=TRACE_SCHEMA))


def test_shards_are_finished_when_their_traces_exist(tmp_path):
    out = RunFolder(tmp_path / "out")
    out.create()
    results = [_result("a", answers=2), _result("b", answers=0), _result("c", answers=0, error="boom", step="draft"),
               _result("d", answers=0, error="empty question", step="input")]
    out.write_shard(0, *_tables(results[:2]))
    out.write_shard(12, *_tables(results[2:]))
    (out.answers / "shard-00003.parquet").write_bytes(b"")  # answers renamed, traces not: unfinished
    (out.traces / ".tmp-123-shard-00004.parquet").write_bytes(b"")

    assert out.finished() == {0, 12}
    assert out.failed(12) == {"c"}, "input errors are not retried"
    assert out.read_traces(["question_id"]).column(0).to_pylist() == ["a", "b", "c", "d"]
    assert out.read_answers().num_rows == out.count_answers() == 2
    out.remove_temporaries()
    assert not list(out.traces.glob(".tmp-*"))

    counts = trace_counts(out.trace_shards(COLUMNS))
    assert counts | {"kb_calls_per_question": 3.0} == counts
    assert (counts["questions"], counts["answered"], counts["empty"], counts["errors"], counts["input_errors"]) == (
        4, 1, 1, 2, 1)

    moved = out.move_previous()
    assert out.finished() == set() and not list(out.answers.iterdir())
    assert moved is not None and RunFolder(moved).finished() == {0, 12}
    assert out.move_previous() is None, "nothing left to move"


def test_a_shard_written_before_checksums_is_checked_by_its_footers_only(tmp_path):
    out = RunFolder(tmp_path / "out")
    out.create()
    answers, traces = _tables([_result("a", answers=2)])
    pq.write_table(answers, out.answers / "shard-00000.parquet")
    pq.write_table(traces.replace_schema_metadata({b"kifqa.rows": b"1", b"kifqa.answers": b"shard-00000.parquet",
                                                   b"kifqa.answer_rows": b"2"}), out.traces / "shard-00000.parquet")
    assert out.finished() == {0} and out.count_answers() == 2


def test_manifest_round_trip(tmp_path):
    out = RunFolder(tmp_path)
    assert out.read_manifest() is None
    out.write_manifest({"job_key": "k", "runs": []})
    assert out.read_manifest() == {"job_key": "k", "runs": []}
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_least_loaded_spreads_calls_and_forgets_them_when_copied():
    import pickle

    pool = LeastLoaded(["a", "b"])
    with pool.pick() as first, pool.pick() as second:
        assert {first, second} == {"a", "b"}
        with pool.pick() as third:
            assert third in {"a", "b"}
        copy = pickle.loads(pickle.dumps(pool))
        with copy.pick() as x, copy.pick() as y:
            assert {x, y} == {"a", "b"}
    picks = []
    for _ in range(4):
        with pool.pick() as member:
            picks.append(member)
    assert sorted(picks) == ["a", "a", "b", "b"], "idle members take turns"
