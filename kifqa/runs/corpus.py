"""Reads a corpus of questions (JSONL, CSV or Parquet) into :class:`Question` objects, one slice at a time.

Every input row becomes exactly one question. A row that cannot be used (broken JSON, a CSV/TSV record
with a quote left open or a field over 131,072 characters, a damaged Parquet row group, a missing or
duplicate id, a question that is empty, too long or not a string) becomes a question whose ``error``
says why, and the rows after it are read as rows; it keeps a unique id (``#row12``, ``q7#row12`` for a
duplicate of ``q7``) so that its error trace can be found.

:func:`read_corpus` scans the file once and keeps no question: per row only where it starts in the
file (8 bytes; 16 in JSONL, whose row numbers are line numbers) and, while scanning, a 16-byte hash
of its id to find the duplicates. A :class:`Rows` slice then reads its own questions from the file,
so a batch job's driver does not hold the corpus and each shard task reads only its shard.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kifqa.errors import ConfigError
from kifqa.runs.storage import is_uri, local_path, open_input, resolve, shown, stamp
from kifqa.types import Question

#: One input row: its 1-based number, where it starts (a byte offset; the row index in Parquet) and its
#: fields, or why it could not be read.
_Row = tuple[int, int, dict[str, Any] | str]

#: Lone UTF-16 surrogates: JSON escapes may make them, UTF-8 (Parquet, Arrow) cannot hold them.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Where a line ends inside a chunk split at ``\n``: after a ``\r`` not followed by ``\n``.
_LONE_CR = re.compile(rb"(?<=\r)(?=[^\n])")

_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv",
            ".parquet": "parquet", ".pq": "parquet"}


@dataclass(frozen=True)
class Reading:
    """How a corpus's rows become questions: its id and question columns, the longest question."""

    id_column: str = "id"
    question_column: str = "question"
    max_chars: int = 1000


@dataclass(frozen=True)
class CorpusFile:
    """A corpus file as scanned: where it is, its format and how its rows become questions, its CSV
    header, and its size and modification time then."""

    #: An absolute local path, or a URI (:mod:`kifqa.runs.storage`).
    path: Path | str
    fmt: str
    reading: Reading
    #: The CSV header's field names.
    header: tuple[str, ...] | None
    stamp: tuple[int, int]

    def check(self) -> None:
        """Raises :class:`ConfigError` if the file changed since it was scanned (its rows may have moved)."""
        if _stamp(self.path) != self.stamp:
            raise ConfigError(f"{shown(self.path)} changed since the job read it: rerun the job on the new file")


@dataclass(frozen=True)
class Rows:
    """Rows ``[start, stop)`` of a corpus file (blank JSONL lines are not rows), with what it takes to
    read them into questions without reading the rest of the file."""

    file: CorpusFile
    #: Whether any row of the corpus has an id (otherwise ids are made from row numbers).
    has_ids: bool
    start: int
    stop: int
    #: Where row ``start`` begins: a byte offset (JSONL, CSV), unused in Parquet.
    offset: int
    #: Row ``start``'s 1-based number (its line number in JSONL).
    number: int
    #: Row number -> the number of the first row with the same id, for the duplicates in this slice.
    duplicates: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.stop - self.start

    def questions(self) -> list[Question]:
        """The slice's questions, in file order; raises :class:`ConfigError` if the file changed since
        it was scanned."""
        self.file.check()
        rows = _read(self.file, start=self.start, offset=self.offset, number=self.number)
        return [_question(number, fields, self.file.reading, self.has_ids, self.duplicates.get(number))
                for number, _, fields in islice(rows, len(self))]


@dataclass(frozen=True, eq=False)
class Corpus:
    """A scanned corpus file: its fingerprint, size and input errors, and where each row starts."""

    file: CorpusFile
    sha256: str
    has_ids: bool
    #: Rows with an error (unreadable, bad id, duplicate id, bad question).
    n_errors: int
    #: Row number -> the number of the first row with the same id, for every duplicate.
    duplicates: dict[int, int]
    _offsets: array
    _numbers: array

    @property
    def path(self) -> Path | str:
        return self.file.path

    def __len__(self) -> int:
        return len(self._offsets)

    def rows(self, size: int) -> list[Rows]:
        """The corpus in slices of ``size`` rows."""
        numbers = list(self.duplicates)  # in row order
        return [self._slice(start, min(start + size, len(self)), numbers) for start in range(0, len(self), size)]

    def questions(self) -> list[Question]:
        """Every question of the corpus (read again from the file)."""
        return self._slice(0, len(self), list(self.duplicates)).questions() if len(self) else []

    def _slice(self, start: int, stop: int, duplicate_numbers: list[int]) -> Rows:
        number = self._numbers[start] if self._numbers else start + 1
        last = self._numbers[stop - 1] if self._numbers else stop
        inside = duplicate_numbers[bisect_left(duplicate_numbers, number):bisect_right(duplicate_numbers, last)]
        return Rows(self.file, self.has_ids, start, stop, offset=self._offsets[start], number=number,
                    duplicates={n: self.duplicates[n] for n in inside})


def read_rows(path: str | Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Every row of a corpus file with all its fields, numbered as :func:`read_corpus` numbers them
    (1-based; in JSONL the line number, blank lines are no rows): ``(number, fields)``, or
    ``(number, why)`` for a row that cannot be read. Other files with questions (gold files) read
    their rows here, so that their ids are the corpus's."""
    path, fmt, found = _located(path)
    if fmt == "parquet":
        rows = _parquet_rows(path, 0, None)
    else:
        rows = _read(CorpusFile(path, fmt, Reading(), _csv_header(path, fmt), found))
    for number, _, fields in rows:
        yield number, fields


def has_ids(rows: Iterable[dict[str, Any] | str], id_column: str) -> bool:
    """Whether a corpus has ids: some row has the id column (otherwise ids are made from row numbers)."""
    return any(isinstance(fields, dict) and id_column in fields for fields in rows)


def row_id(value: Any, *, has_ids: bool, number: int) -> tuple[str | None, str | None]:
    """The id of row ``number`` whose id column holds ``value`` and, when it is unusable, why:
    ``q000001``... (the row number) in a corpus without ids."""
    if not has_ids:
        return f"q{number:06d}", None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value), None
    if isinstance(value, str) and value.strip():
        return value.strip(), None
    if value is None or isinstance(value, str):
        return None, "missing id"
    return None, f"id must be a string or an integer, not {type(value).__name__}"


def _located(where: str | Path) -> tuple[Path | str, str, tuple[int, int]]:
    """The absolute path (or the URI) of a corpus file, its format and its stamp (size, modification time);
    raises :class:`ConfigError` if it is no corpus file."""
    path = str(where) if is_uri(where) else local_path(where)
    fmt = _FORMATS.get(PurePosixPath(urlsplit(path).path if isinstance(path, str) else path).suffix.lower())
    if fmt is None:
        raise ConfigError(f"{shown(path)}: unknown corpus format (use .jsonl, .csv, .tsv or .parquet)")
    found = stamp(path)
    if found is None:
        raise ConfigError(f"{shown(path)}: no such corpus file")
    return path, fmt, found


def read_corpus(path: str | Path, *, id_column: str = "id", question_column: str = "question",
                max_chars: int = 1000) -> Corpus:
    """Scans ``path`` (see the module doc); ids are ``q000001``... (the row number) when no row has an
    id (:func:`has_ids`, :func:`row_id`)."""
    path, fmt, found = _located(path)
    file = CorpusFile(path, fmt, Reading(id_column, question_column, max_chars), _csv_header(path, fmt), found)
    digest = hashlib.sha256()
    offsets, numbers = array("q"), array("q")
    flags = bytearray()  # per row: 1 unusable or a bad question, 2 a bad id
    id_rows, id_hashes = array("q"), bytearray()
    any_id = False
    for number, offset, fields in _read(file, digest=digest):
        offsets.append(offset)
        if fmt == "jsonl":
            numbers.append(number)
        if isinstance(fields, str):
            flags.append(1)
            continue
        any_id = any_id or id_column in fields
        qid, id_error = row_id(_utf8(fields.get(id_column)), has_ids=True, number=number)
        flags.append((_text_error(_utf8(fields.get(question_column)), question_column, max_chars) is not None)
                     | (id_error is not None) << 1)
        if qid is not None:
            id_rows.append(len(offsets) - 1)
            id_hashes += hashlib.blake2b(qid.encode(), digest_size=16).digest()
    if fmt == "parquet":
        _hash_file(path, digest)
    duplicates = _duplicates(id_rows, id_hashes) if any_id else []
    number_of = (lambda i: numbers[i]) if numbers else (lambda i: i + 1)
    bad = np.frombuffer(bytes(flags), dtype=np.uint8) & (3 if any_id else 1) > 0
    bad[[row for row, _ in duplicates]] = True
    return Corpus(file, digest.hexdigest(), any_id, int(bad.sum()),
                  {number_of(row): number_of(first) for row, first in duplicates}, offsets, numbers)


def _duplicates(rows: array, hashes: bytearray) -> list[tuple[int, int]]:
    """(row, first row with the same id hash) for every row whose id an earlier row has."""
    if not rows:
        return []
    keys = np.frombuffer(bytes(hashes), dtype=np.uint64).reshape(-1, 2)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    first_of = first[inverse.reshape(-1)]
    again = np.nonzero(first_of != np.arange(len(rows)))[0]
    return [(rows[i], rows[first_of[i]]) for i in again.tolist()]


def _question(number: int, fields: dict[str, Any] | str, reading: Reading, has_ids: bool,
              first: int | None) -> Question:
    """Row ``number`` as a question; ``first`` is the number of the first row with its id, if it is a
    duplicate."""
    if isinstance(fields, str):
        return Question(f"#row{number}", "", error=fields)
    qid, id_error = row_id(_utf8(fields.get(reading.id_column)), has_ids=has_ids, number=number)
    text = _utf8(fields.get(reading.question_column))
    error = id_error or _text_error(text, reading.question_column, reading.max_chars)
    if qid is None:
        qid = f"#row{number}"
    elif first is not None:
        error = error or f"duplicate id {qid!r} (first at row {first})"
        qid = f"{qid}#row{number}"
    shown = text[:reading.max_chars] if isinstance(text, str) else ""
    return Question(qid, shown if error else text, error=error)


def _utf8(value: Any) -> Any:
    """``value``, with any lone surrogate of a string replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value


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


# -- reading rows ----------------------------------------------------------------


def _read(file: CorpusFile, *, start: int = 0, offset: int = 0, number: int = 1,
          digest: Any = None) -> Iterator[_Row]:
    """The rows of ``file`` from row ``start`` (which begins at byte ``offset`` and is numbered
    ``number``); ``digest`` (text formats, from the file's start) is fed every byte read."""
    if file.fmt == "parquet":
        names = _parquet(file.path).schema_arrow.names
        wanted = [c for c in (file.reading.id_column, file.reading.question_column) if c in names]
        yield from _parquet_rows(file.path, start, wanted or None)  # a question needs no other column
        return
    with open_input(file.path) as data:
        data.seek(offset)
        lines = _lines(data, offset, digest)
        if file.fmt == "jsonl":
            yield from _jsonl_rows(lines, number)
        else:
            yield from _csv_rows(lines, number, file.header or (), delimiter="\t" if file.fmt == "tsv" else ",",
                                 at_start=offset == 0)


def _lines(data: BinaryIO, offset: int, digest: Any) -> Iterator[tuple[int, int, str]]:
    """(byte offset, byte length, text) of each line from ``offset``, split at ``\\n``, ``\\r\\n`` and
    ``\\r`` (as Python's text files read them), with the line ends kept and bad UTF-8 replaced."""
    for chunk in data:
        if digest is not None:
            digest.update(chunk)
        for line in _LONE_CR.split(chunk) if b"\r" in chunk else (chunk,):
            yield offset, len(line), line.decode("utf-8", errors="replace")
            offset += len(line)


def _jsonl_rows(lines: Iterable[tuple[int, int, str]], start: int) -> Iterator[_Row]:
    for number, (offset, _, line) in enumerate(lines, start=start):
        if not line.strip():
            continue
        try:
            fields = json.loads(line)
        except json.JSONDecodeError as err:
            yield number, offset, f"broken JSON: {err}"
            continue
        if isinstance(fields, dict):
            yield number, offset, fields
        else:
            yield number, offset, f"row is a JSON {type(fields).__name__}, not an object"


def _csv_header(path: Path | str, fmt: str) -> tuple[str, ...] | None:
    if fmt not in ("csv", "tsv"):
        return None
    with io.TextIOWrapper(open_input(path), encoding="utf-8", errors="replace", newline="") as text:
        return tuple(next(csv.reader(text, delimiter="\t" if fmt == "tsv" else ","), ()))


def _csv_rows(lines: Iterable[tuple[int, int, str]], number: int, header: tuple[str, ...], *,
              delimiter: str, at_start: bool) -> Iterator[_Row]:
    """The records numbered from ``number`` (after the header, skipped ``at_start`` of the file), blank
    lines skipped as :class:`csv.DictReader` skips them. A record may span lines (quoted newlines) when
    it reads whole within :data:`MAX_RECORD_CHARS` with the header's fields; otherwise (a quote left
    open, a field over the limit) its first line is an error row and the lines after it are read again as
    records, so an unterminated quote costs one row, never the rows after it."""
    source = iter(lines)
    pending: deque[tuple[int, int, str]] = deque()  # lines read ahead and given back
    kind = "TSV" if delimiter == "\t" else "CSV"
    if at_start:
        _csv_record(pending, source, delimiter)
    while (record := _csv_record(pending, source, delimiter)) is not None:
        taken, values = record
        if values == []:
            continue  # a blank line
        start = taken[0][0]
        if isinstance(values, list) and len(values) == len(header):
            yield number, start, dict(zip(header, values))
        elif isinstance(values, list) and len(taken) == 1:
            yield number, start, f"row has {'more' if len(values) > len(header) else 'fewer'} fields than the header"
        else:
            pending.extendleft(reversed(taken[1:]))  # its later lines are read again, as records of their own
            why = values if isinstance(values, str) else "a quote left open (its fields do not match the header)"
            yield number, start, f"unreadable {kind} row: {why}"
        number += 1


#: Characters one CSV/TSV record may hold (Python's ``csv.field_size_limit`` by default): past them the
#: record is an error row (a quote left open would otherwise take in every later line).
MAX_RECORD_CHARS = 131_072


class _RecordOverrun(Exception):
    """A record ran past :data:`MAX_RECORD_CHARS`, or past the end of the file inside a quote."""


def _csv_record(pending: deque[tuple[int, int, str]], source: Iterator[tuple[int, int, str]],
                delimiter: str) -> tuple[list[tuple[int, int, str]], list[str] | str] | None:
    """The next record: the lines it took and its values, or why they cannot be read; ``None`` at the
    end of the file. A record of several lines must read strictly (a quote closed by another row's stray
    one does not); a line alone is read as leniently as :mod:`csv` reads by default."""
    taken: list[tuple[int, int, str]] = []
    chars = 0

    def feed() -> Iterator[str]:
        nonlocal chars
        while True:
            line = pending.popleft() if pending else next(source, None)
            if line is None:
                if taken:
                    raise _RecordOverrun("the file ends inside a quoted field (a quote left open)")
                return
            taken.append(line)
            chars += len(line[2])
            if chars > MAX_RECORD_CHARS:
                raise _RecordOverrun(f"over {MAX_RECORD_CHARS:,} characters (a quote left open, or a field "
                                     "too long)")
            yield line[2]

    try:
        values = next(csv.reader(feed(), delimiter=delimiter, strict=True), None)
    except _RecordOverrun as err:
        return taken, str(err)
    except csv.Error as err:
        if len(taken) > 1:
            return taken, f"{err} (a quote left open?)"
        try:  # one line, read as leniently as csv reads by default (a stray quote inside a field is kept)
            return taken, next(csv.reader([taken[0][2]], delimiter=delimiter), [])
        except csv.Error as again:
            return taken, str(again)
    return (taken, values) if values is not None else None


def _parquet_rows(path: Path | str, start: int, columns: list[str] | None) -> Iterator[_Row]:
    """The rows from row ``start`` (only ``columns``, when given), from the row group that holds it on. A
    row group that cannot be read (a damaged page) gives an error row for each of its rows (the file's
    metadata counts them), and the groups after it are read."""
    data = _parquet(path)
    first_row = 0
    for group in range(data.num_row_groups):
        size = data.metadata.row_group(group).num_rows
        if first_row + size > start:
            skip = max(start - first_row, 0)
            try:
                table = data.read_row_group(group, columns=columns).slice(skip)
            except (pa.ArrowException, OSError) as err:
                for i in range(first_row + skip, first_row + size):
                    yield i + 1, i, f"unreadable Parquet row (row group {group}: {err})"
                first_row += size
                continue
            for batch in table.to_batches(max_chunksize=1024):
                for i, fields in enumerate(batch.to_pylist(), start=first_row + skip):
                    yield i + 1, i, fields
                skip += batch.num_rows
        first_row += size


def _parquet(path: Path | str) -> pq.ParquetFile:
    if not is_uri(path):
        return pq.ParquetFile(path)
    fs, inside = resolve(str(path))
    return pq.ParquetFile(fs.open_input_file(inside))


def _stamp(path: Path | str) -> tuple[int, int]:
    found = stamp(path)
    if found is None:
        raise ConfigError(f"{shown(path)}: the corpus file is gone")
    return found


def _hash_file(path: Path | str, digest: Any) -> None:
    with open_input(path) as data:
        for chunk in iter(lambda: data.read(1 << 20), b""):
            digest.update(chunk)
