"""Reading corpora: formats, generated ids, and one question (with an error) for every bad row."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kifqa.runs import read_corpus
from kifqa.errors import ConfigError


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
    got = {q.id: (q.text, q.error) for q in corpus.questions}

    assert len(corpus.questions) == 10  # the blank line is not a row
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
    assert [(q.id, q.text, q.error) for q in read_corpus(path).questions] == [
        ("q000001", "one", None), ("q000002", "two", None)]


def test_csv_and_tsv_with_custom_columns(tmp_path):
    csv_path = tmp_path / "c.csv"
    csv_path.write_text('qid,text\nx1,"who wrote, the book"\nx2\nx3,a,b\n,no id\n')
    questions = read_corpus(csv_path, id_column="qid", question_column="text").questions
    assert [(q.id, q.error) for q in questions] == [
        ("x1", None), ("#row2", "row has fewer fields than the header"),
        ("#row3", "row has more fields than the header"), ("#row4", "missing id")]
    assert questions[0].text == "who wrote, the book"

    tsv_path = tmp_path / "c.tsv"
    tsv_path.write_text("question\nwhat is it\n")
    assert [(q.id, q.text) for q in read_corpus(tsv_path).questions] == [("q000001", "what is it")]


def test_parquet_with_wrong_types(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [1, 2, None], "question": ["who is he", None, "who is she"]}), path)
    assert [(q.id, q.error) for q in read_corpus(path).questions] == [
        ("1", None), ("2", "missing 'question'"), ("#row3", "missing id")]


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="unknown corpus format"):
        read_corpus(tmp_path / "c.xml")
    with pytest.raises(ConfigError, match="no such corpus file"):
        read_corpus(tmp_path / "c.jsonl")
