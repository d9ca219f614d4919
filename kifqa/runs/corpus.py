"""Reads a corpus of questions (JSONL, CSV or Parquet) into :class:`Question` objects.

Every input row becomes exactly one question. A row that cannot be used (broken JSON, a missing or
duplicate id, a question that is empty, too long or not a string) becomes a question whose ``error``
says why; it keeps a unique id (``#row12``, ``q7#row12`` for a duplicate of ``q7``) so that its
error trace can be found.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kifqa.errors import ConfigError
from kifqa.types import Question

#: One input row: its 1-based number and its fields, or why it could not be read.
_Row = tuple[int, dict[str, Any] | str]

#: Lone UTF-16 surrogates: JSON escapes may make them, UTF-8 (Parquet, Arrow) cannot hold them.
_SURROGATE = re.compile("[\ud800-\udfff]")

_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv",
            ".parquet": "parquet", ".pq": "parquet"}


@dataclass(frozen=True)
class Corpus:
    """The questions of one corpus file, in input order, and the file's fingerprint."""

    path: Path
    sha256: str
    questions: list[Question]

    @property
    def n_errors(self) -> int:
        return sum(q.error is not None for q in self.questions)


def read_corpus(path: str | Path, *, id_column: str = "id", question_column: str = "question",
                max_chars: int = 1000) -> Corpus:
    """The questions of ``path``; ids are ``q000001``... (the row number) when no row has an id."""
    path = Path(path).absolute()
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ConfigError(f"{path}: unknown corpus format (use .jsonl, .csv, .tsv or .parquet)")
    if not path.is_file():
        raise ConfigError(f"{path}: no such corpus file")
    if fmt == "jsonl":
        rows = list(_jsonl_rows(path))
    elif fmt == "parquet":
        rows = list(_parquet_rows(path))
    else:
        rows = list(_csv_rows(path, delimiter="\t" if fmt == "tsv" else ","))
    has_ids = any(isinstance(fields, dict) and id_column in fields for _, fields in rows)
    questions = _questions(rows, id_column, question_column, max_chars, has_ids)
    return Corpus(path=path, sha256=_sha256(path), questions=questions)


def _questions(rows: list[_Row], id_column: str, question_column: str, max_chars: int,
               has_ids: bool) -> list[Question]:
    seen: dict[str, int] = {}
    questions = []
    for number, fields in rows:
        if isinstance(fields, str):
            questions.append(Question(f"#row{number}", "", error=fields))
            continue
        qid, id_error = _question_id(_utf8(fields.get(id_column)), has_ids, number)
        text = _utf8(fields.get(question_column))
        error = id_error or _text_error(text, question_column, max_chars)
        if qid is None:
            qid = f"#row{number}"
        elif qid in seen:
            error = error or f"duplicate id {qid!r} (first at row {seen[qid]})"
            qid = f"{qid}#row{number}"
        else:
            seen[qid] = number
        shown = text[:max_chars] if isinstance(text, str) else ""
        questions.append(Question(qid, shown if error else text, error=error))
    return questions


def _utf8(value: Any) -> Any:
    """``value``, with any lone surrogate of a string replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value


def _question_id(value: Any, has_ids: bool, number: int) -> tuple[str | None, str | None]:
    """The row's id and, when it is unusable, why."""
    if not has_ids:
        return f"q{number:06d}", None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value), None
    if isinstance(value, str) and value.strip():
        return value.strip(), None
    if value is None or isinstance(value, str):
        return None, "missing id"
    return None, f"id must be a string or an integer, not {type(value).__name__}"


def _text_error(text: Any, column: str, max_chars: int) -> str | None:
    if text is None:
        return f"missing {column!r}"
    if not isinstance(text, str):
        return f"{column!r} must be a string, not {type(text).__name__}"
    if not text.strip():
        return "empty question"
    if len(text) > max_chars:
        return f"question too long ({len(text)} characters; limit {max_chars})"
    return None


def _jsonl_rows(path: Path) -> Iterator[_Row]:
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                fields = json.loads(line)
            except json.JSONDecodeError as err:
                yield number, f"broken JSON: {err}"
                continue
            if isinstance(fields, dict):
                yield number, fields
            else:
                yield number, f"row is a JSON {type(fields).__name__}, not an object"


def _csv_rows(path: Path, *, delimiter: str) -> Iterator[_Row]:
    with path.open(encoding="utf-8", errors="replace", newline="") as lines:
        reader = csv.DictReader(lines, delimiter=delimiter)
        for number, fields in enumerate(reader, start=1):
            if None in fields:
                yield number, "row has more fields than the header"
            elif None in fields.values():
                yield number, "row has fewer fields than the header"
            else:
                yield number, fields


def _parquet_rows(path: Path) -> Iterator[_Row]:
    number = 0
    for batch in pq.ParquetFile(path).iter_batches():
        for fields in batch.to_pylist():
            number += 1
            yield number, fields


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for chunk in iter(lambda: data.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
