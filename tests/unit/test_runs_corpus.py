"""Reading corpora: formats, generated ids, and one question (with an error) for every bad row."""

from __future__ import annotations

import json
import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kifqa.errors import ConfigError
from kifqa.runs import read_corpus


def test_jsonl_bad_rows_each_become_one_error_question(tmp_path):
    lines = [
        json.dumps({"id": "a", "question": "where was sasha vujacic born"}),
        json.dumps({"id": "b", "question": "   "}),
        json.dumps({"id": "a", "question": "a duplicate id"}),
        json.dumps({"question": "no id here"}),
        '{"id": "c", "question": "broken',
        json.dumps({"id": 7, "question": 42}),
        json.dumps({"id": 1.5, "question": "a float id"}),
        json.dumps(["not", "an", "object"]),
        json.dumps({"id": "long", "question": "x" * 100_000}),
        "",
        json.dumps({"id": 9, "question": "what is the capital of france"}),
    ]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    corpus = read_corpus(path, max_chars=1000)
    got = {q.id: (q.text, q.error) for q in corpus.questions()}

    assert len(corpus) == len(corpus.questions()) == 10  # the blank line is not a row
    assert len(got) == 10, "ids stay unique"
    assert got["a"] == ("where was sasha vujacic born", None)
    assert got["9"] == ("what is the capital of france", None)
    assert got["b"][1] == "empty question"
    assert got["a#row3"][1] == "duplicate id 'a' (first at row 1)"
    assert got["#row4"][1] == "missing id"
    assert got["#row5"][1].startswith("broken JSON")
    assert got["7"][1] == "'question' must be a string, not int"
    assert got["#row7"][1] == "id must be a string or an integer, not float"
    assert got["#row8"][1] == "row is a JSON list, not an object"
    text, error = got["long"]
    assert error == "question too long (100000 characters; limit 1000)" and len(text) == 1000
    assert corpus.n_errors == 8
    assert len(corpus.sha256) == 64


def test_ids_are_generated_when_no_row_has_one(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"question": "one"}\n{"question": "two"}\n')
    assert [(q.id, q.text, q.error) for q in read_corpus(path).questions()] == [
        ("q000001", "one", None), ("q000002", "two", None)]


def test_csv_and_tsv_with_custom_columns(tmp_path):
    csv_path = tmp_path / "c.csv"
    csv_path.write_text('qid,text\nx1,"who wrote, the book"\nx2\nx3,a,b\n,no id\n')
    questions = read_corpus(csv_path, id_column="qid", question_column="text").questions()
    assert [(q.id, q.error) for q in questions] == [
        ("x1", None), ("#row2", "row has fewer fields than the header"),
        ("#row3", "row has more fields than the header"), ("#row4", "missing id")]
    assert questions[0].text == "who wrote, the book"

    tsv_path = tmp_path / "c.tsv"
    tsv_path.write_text("question\nwhat is it\n")
    assert [(q.id, q.text) for q in read_corpus(tsv_path).questions()] == [("q000001", "what is it")]


def test_parquet_with_wrong_types(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [1, 2, None], "question": ["who is he", None, "who is she"]}), path)
    assert [(q.id, q.error) for q in read_corpus(path).questions()] == [
        ("1", None), ("2", "missing 'question'"), ("#row3", "missing id")]


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="unknown corpus format"):
        read_corpus(tmp_path / "c.xml")
    with pytest.raises(ConfigError, match="no such corpus file"):
        read_corpus(tmp_path / "c.jsonl")


def _written(tmp_path, fmt: str):
    """A corpus in ``fmt`` with what makes slicing hard: blank lines, CRLF and lone CR line ends, quoted
    newlines (CSV), bad UTF-8, several row groups (Parquet), duplicates far from their first row."""
    ids = ["a", "b", "a", "", "c", "d", "b", "e", "f", "a", "g", "h"]
    texts = ["where was x born", "who wrote y\nz" if fmt == "csv" else "who wrote y", "dup", "no id",
             "   ", "what is é", "dup again", "q8", "q9", "third a", "q11", "q12"]
    path = tmp_path / f"c.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.table({"id": ids, "question": texts, "other": list(range(12))}), path, row_group_size=5)
    elif fmt == "csv":
        body = "".join(f'{i},"{t}"\r\n' if k % 2 else f'{i},"{t}"\n' for k, (i, t) in enumerate(zip(ids, texts)))
        path.write_bytes(("id,question\n" + body).replace('"q9"\n', '"q9"\n\n').encode())
    else:
        lines = [json.dumps({"id": i, "question": t}) for i, t in zip(ids, texts)]
        lines.insert(4, "")
        data = "\n".join(lines[:6]).encode() + b"\r" + "\r\n".join(lines[6:]).encode() + b"\n"
        path.write_bytes(data.replace(b'"q8"', b'"q8 \xff"'))
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_every_slicing_reads_the_same_questions_as_the_whole_file(fmt, tmp_path):
    corpus = read_corpus(_written(tmp_path, fmt))
    whole = corpus.questions()
    assert len(corpus) == len(whole) == 12
    ids = [q.id for q in whole]
    assert len(set(ids)) == 12 and ids[0] == "a" and ids[2].startswith("a#row") and ids[9].startswith("a#row")
    assert whole[9].error == "duplicate id 'a' (first at row 1)"
    assert whole[3].error == "missing id" and whole[4].error == "empty question"
    assert corpus.n_errors == sum(q.error is not None for q in whole) == 5
    for size in range(1, 13):
        slices = corpus.rows(size)
        assert [q for rows in slices for q in rows.questions()] == whole, size
    shard = pickle.dumps(corpus.rows(4)[2])
    assert len(shard) < 1000 and b"third a" not in shard, "a slice carries where its rows are, not the rows"


def test_a_slice_of_a_file_changed_since_the_scan_says_so(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "question": "who is a"}\n{"id": "b", "question": "who is b"}\n')
    rows = read_corpus(path).rows(1)
    path.write_text('{"id": "x", "question": "a longer first row moves the second"}\n{"id": "b", "question": "who is b"}\n')
    with pytest.raises(ConfigError, match="changed since the job read it"):
        rows[1].questions()


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_an_unterminated_quote_or_an_overlong_field_costs_its_row_only(fmt, tmp_path):
    """A quote left open would take in every later line (csv reads to the next quote or the end of the
    file), and a field over csv's 131,072-character limit would raise: each is one error row, and the
    rows after it are read as rows, at any slicing; a quoted newline still joins its lines, and a stray
    quote inside one line's field is kept as before."""
    sep = "\t" if fmt == "tsv" else ","
    lines = [f"id{sep}question", f'q1{sep}"who wrote dracula', f"q2{sep}where was sasha vujačić born",
             f'q3{sep}"what genre is', 'the album thriller"', f"q4{sep}" + "x" * 140_000, f'q5{sep}"who is "it" here',
             f"q6{sep}what is the nationality of kim jong-un", f'q7{sep}"the last one, unterminated']
    path = tmp_path / f"c.{fmt}"
    path.write_text("\n".join(lines) + "\n")
    corpus = read_corpus(path)
    questions = corpus.questions()
    assert [(q.id, q.error is None) for q in questions] == [
        ("#row1", False), ("q2", True), ("q3", True), ("#row4", False), ("q5", True), ("q6", True),
        ("#row7", False)]
    assert questions[1].text == "where was sasha vujačić born" and questions[2].text == "what genre is\nthe album thriller"
    kind = fmt.upper()
    assert questions[0].error.startswith(f"unreadable {kind} row:")
    assert "131,072 characters" in questions[3].error and "quote left open" in questions[6].error
    assert corpus.n_errors == 3
    for size in (1, 2, 3):
        assert [q.id for r in corpus.rows(size) for q in r.questions()] == [q.id for q in questions]


def test_a_damaged_parquet_row_group_gives_error_rows_and_the_rest_is_read(tmp_path):
    path = tmp_path / "c.parquet"
    table = pa.table({"id": [f"q{i}" for i in range(6)], "question": [f"question number {i}" for i in range(6)]})
    pq.write_table(table, path, row_group_size=3, compression="none", use_dictionary=False)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1)
    data = bytearray(path.read_bytes())
    at = chunk.data_page_offset + chunk.total_compressed_size - 40  # a string's length, inside the first group
    data[at:at + 4] = b"\xff\xff\xff\x7f"
    path.write_bytes(bytes(data))
    corpus = read_corpus(path)
    questions = corpus.questions()
    assert [q.id for q in questions] == ["#row1", "#row2", "#row3", "q3", "q4", "q5"]
    assert all(q.error and q.error.startswith("unreadable Parquet row (row group 0:") for q in questions[:3])
    assert [q.text for q in questions[3:]] == ["question number 3", "question number 4", "question number 5"]
    assert corpus.n_errors == 3
    assert [q.id for r in corpus.rows(2) for q in r.questions()] == [q.id for q in questions]
