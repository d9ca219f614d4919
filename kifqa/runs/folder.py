"""The layout of a run folder: ``answers/`` and ``traces/`` Parquet (one file per shard) and ``manifest.json``,
on this machine's disk or at a URI (:mod:`kifqa.runs.storage`).

A shard commits with its traces file, written after its answers file: the shard is finished exactly when
its traces file reads back whole, that is its Parquet footer reads and holds the row counts its writer
recorded there, for itself and for the answers file it names, which must read back whole too, and the
SHA-256 checksums recorded there with them: of the answers file, and of the traces file's bytes before its
footer (which Parquet's reader checks). Shards written before checksums were recorded are checked by their
footers only.

- On a local disk each file is written under a temporary name, fsynced, renamed into place and its folder
  fsynced, so a crash leaves whole files or temporary ones (removed at the next start).
- An object store has no rename, but an object appears whole or not at all. Each attempt of a shard
  writes its answers to a key of its own (``answers/shard-00003.<attempt>.parquet``) that its traces
  object names: two attempts of one shard (a task rerun after its node was lost) never pair one's answers
  with the other's traces, and answers that no traces name are removed at the next start.

A shard that does not read back whole (a file cut short, bytes overwritten, a missing answers file) is left
out of every reader and, at the next start of the job, set aside to ``set-aside/`` and recomputed; so is a
manifest that is not a JSON object. A fresh start (``--no-resume``) moves the previous job's files to
``previous-<time>/`` (:meth:`RunFolder.move_previous`). Other files in
``answers/`` and ``traces/`` (``shard-00000 (copy).parquet``) are ignored with a warning. Local run folders
are made 0700 and their files 0600: they hold questions and prompts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from kifqa.errors import ConfigError
from kifqa.runs.lock import Lease, local_lock
from kifqa.runs.schema import ANSWER_SCHEMA, TRACE_SCHEMA
from kifqa.runs.storage import TMP, is_uri, local_path, resolve, shown, write_private

log = logging.getLogger(__name__)

#: A traces file's name, and an answers file's (an attempt's id after the index on an object store).
_TRACES = re.compile(r"shard-(\d{5,})\.parquet")
_ANSWERS = re.compile(r"shard-(\d{5,})(?:\.[0-9a-f]{8,})?\.parquet")
#: The keys a traces file's Parquet metadata holds: its rows, its answers file and that file's rows.
_ROWS, _ANSWERS_FILE, _ANSWER_ROWS = b"kifqa.rows", b"kifqa.answers", b"kifqa.answer_rows"
#: ... and the SHA-256 of the answers file, and of the traces file's bytes before its footer.
_ANSWERS_SHA256, _PAGES_SHA256 = b"kifqa.answers_sha256", b"kifqa.pages_sha256"
#: Bytes read at once while a file is hashed.
_CHUNK = 1 << 20
#: Shards checked at once (footers read, files hashed).
_READERS = 16


@dataclass(frozen=True)
class ShardFiles:
    """A finished shard: its index, the name of its answers file, its questions and answer rows."""

    index: int
    answers: str
    questions: int
    answer_rows: int


@dataclass(frozen=True)
class SetAside:
    """A shard (``index``; ``None``: the manifest) that did not read back whole, why, and where it was moved."""

    index: int | None
    reason: str
    moved_to: str


@dataclass(frozen=True)
class _Broken:
    """Why a shard does not read back whole, and the answers file its traces name (set aside with them)."""

    reason: str
    answers: str


class RunFolder:
    """Reads and writes the files of one run folder (the output of a job), local or at a URI."""

    def __init__(self, root: str | Path) -> None:
        self.remote = is_uri(root)
        #: The folder as kifqa shows and records it (a URI without credentials).
        self.uri = shown(root)
        if self.remote:
            self._fs, self._base = resolve(str(root))
        else:
            self._fs, self._base = pafs.LocalFileSystem(), str(local_path(root))
        self._answers, self._traces = f"{self._base}/answers", f"{self._base}/traces"
        self._manifest = f"{self._base}/manifest.json"
        #: Shards already checked: (traces file, size, mtime) -> the shard, or why it is not whole.
        self._checked: dict[tuple[str, int, int], ShardFiles | _Broken] = {}
        self._warned: set[str] = set()

    @property
    def root(self) -> Path:
        """The folder on this machine's disk (a local run folder only)."""
        if self.remote:
            raise ValueError(f"{self.uri} is not on this machine's disk")
        return Path(self._base)

    @property
    def answers(self) -> Path:
        """The local folder of the answers files."""
        return self.root / "answers"

    @property
    def traces(self) -> Path:
        """The local folder of the traces files."""
        return self.root / "traces"

    def exists(self) -> bool:
        """Whether the folder holds a run (its ``traces/`` folder; on an object store, any trace)."""
        if not self.remote:
            return Path(self._traces).is_dir()
        return bool(self._list(self._traces))

    def create(self) -> None:
        if self.remote:
            try:
                self._fs.create_dir(self._base, recursive=True)
            except OSError as err:
                raise ConfigError(f"{self.uri}: cannot write here ({_first_line(err)}); check that the bucket "
                                  "exists and that the credentials may write to it") from None
            return
        for folder in (self._base, self._answers, self._traces):
            with contextlib.suppress(FileExistsError):
                Path(folder).mkdir(mode=0o700, parents=True)

    def lock(self, *, lease_s: float | None = None) -> contextlib.AbstractContextManager[Any]:
        """Holds the folder for this run (see :mod:`kifqa.runs.lock`); raises
        :class:`~kifqa.runs.lock.FolderInUse` when another run holds it."""
        if not self.remote:
            return local_lock(Path(self._base), self.uri)
        options = {} if lease_s is None else {"lease_s": lease_s}
        return Lease(self._fs, f"{self._base}/lease.json", self.uri, **options)

    @staticmethod
    def shard_file(index: int) -> str:
        return f"shard-{index:05d}.parquet"

    def shards(self) -> dict[int, ShardFiles]:
        """The finished shards by index (those that read back whole; the others are warned of)."""
        found: dict[int, ShardFiles] = {}
        for index, checked in self._scan().items():
            if isinstance(checked, ShardFiles):
                found[index] = checked
            else:
                self._warn(f"traces/{self.shard_file(index)}",
                           f"{checked.reason}: left out (the next run of the job recomputes it)")
        return found

    def finished(self) -> set[int]:
        """Indices of the shards whose files are complete."""
        return set(self.shards())

    def broken(self) -> dict[int, str]:
        """The shards whose traces file is there but does not read back whole, and why."""
        return {index: checked.reason for index, checked in self._scan().items() if isinstance(checked, _Broken)}

    def _scan(self) -> dict[int, ShardFiles | _Broken]:
        """Each traces file's shard checked (:meth:`_check`), once while the file is unchanged, :data:`_READERS`
        at a time (on an object store each read is a request or two)."""
        keys: dict[int, tuple[str, int, int]] = {}
        for info in self._list(self._traces):
            name, match = info.base_name, _TRACES.fullmatch(info.base_name)
            if name.startswith(TMP):
                continue
            if match is None or name != self.shard_file(int(match[1])):
                self._warn(f"traces/{name}", "not a shard file: ignored")
                continue
            keys[int(match[1])] = (name, info.size or 0, info.mtime_ns or 0)
        unseen = [(index, key) for index, key in keys.items() if key not in self._checked]
        if unseen:
            with ThreadPoolExecutor(max_workers=_READERS) as pool:
                checked = pool.map(self._check, [index for index, _ in unseen])
                for (_, key), result in zip(unseen, checked, strict=True):
                    self._checked[key] = result
        return {index: self._checked[key] for index, key in keys.items()}

    def _check(self, index: int) -> ShardFiles | _Broken:
        """Shard ``index`` if its traces and answers files read back whole, else why not."""
        traces, default = f"{self._traces}/{self.shard_file(index)}", self.shard_file(index)
        try:
            meta = pq.read_metadata(traces, filesystem=self._fs)
        except (pa.ArrowException, OSError) as err:
            return _Broken(f"unreadable traces file ({_first_line(err)})", default)
        recorded = meta.metadata or {}
        if _ROWS in recorded and int(recorded[_ROWS]) != meta.num_rows:
            return _Broken(f"traces file holds {meta.num_rows} rows of {int(recorded[_ROWS])}", default)
        answers = recorded.get(_ANSWERS_FILE, default.encode()).decode()
        if _ANSWERS.fullmatch(answers) is None:
            return _Broken(f"traces file names a bad answers file {answers!r}", default)
        try:
            answer_meta = pq.read_metadata(f"{self._answers}/{answers}", filesystem=self._fs)
        except FileNotFoundError:
            return _Broken(f"its answers file {answers} is missing", answers)
        except (pa.ArrowException, OSError) as err:
            return _Broken(f"unreadable answers file {answers} ({_first_line(err)})", answers)
        if _ANSWER_ROWS in recorded and int(recorded[_ANSWER_ROWS]) != answer_meta.num_rows:
            return _Broken(f"answers file holds {answer_meta.num_rows} rows of {int(recorded[_ANSWER_ROWS])}",
                           answers)
        try:
            if _PAGES_SHA256 in recorded and (self._sha256(traces, less=meta.serialized_size + 8)
                                              != recorded[_PAGES_SHA256].decode()):
                return _Broken("the traces file changed since it was written (its checksum differs)", answers)
            if _ANSWERS_SHA256 in recorded and (self._sha256(f"{self._answers}/{answers}")
                                                != recorded[_ANSWERS_SHA256].decode()):
                return _Broken(f"the answers file {answers} changed since it was written (its checksum differs)",
                               answers)
        except (pa.ArrowException, OSError) as err:
            return _Broken(f"unreadable shard files ({_first_line(err)})", answers)
        return ShardFiles(index, answers, meta.num_rows, answer_meta.num_rows)

    def _sha256(self, path: str, *, less: int = 0) -> str:
        """The SHA-256 (hex) of the file ``path`` less its last ``less`` bytes, read a chunk at a time."""
        digest = hashlib.sha256()
        with self._fs.open_input_file(path) as file:
            left = file.size() - less
            while left > 0 and (chunk := file.read(min(left, _CHUNK))):
                digest.update(chunk)
                left -= len(chunk)
        return digest.hexdigest()

    def _warn(self, name: str, why: str) -> None:
        if name not in self._warned:
            self._warned.add(name)
            log.warning("%s/%s: %s", self.uri, name, why)

    def write_shard(self, index: int, answers: pa.Table, traces: pa.Table) -> None:
        """Writes both files of shard ``index``, the traces last: they commit it, with the answers file's
        checksum and their own in their footer (see the module doc)."""
        answers_name = (self.shard_file(index) if not self.remote
                        else f"shard-{index:05d}.{uuid.uuid4().hex[:16]}.parquet")
        answers_file = _parquet(answers.cast(ANSWER_SCHEMA))
        traces = traces.cast(TRACE_SCHEMA)
        record = {**(TRACE_SCHEMA.metadata or {}), _ROWS: str(traces.num_rows).encode(),
                  _ANSWERS_FILE: answers_name.encode(), _ANSWER_ROWS: str(answers.num_rows).encode(),
                  _ANSWERS_SHA256: hashlib.sha256(answers_file).hexdigest().encode()}
        # The pages come out the same whatever the footer holds: those written without their checksum hash to it.
        pages = _parquet(traces.replace_schema_metadata(record))
        record[_PAGES_SHA256] = hashlib.sha256(pages[:len(pages) - 8 - _footer_size(pages)]).hexdigest().encode()
        self._write(answers_file, f"{self._answers}/{answers_name}")
        self._write(_parquet(traces.replace_schema_metadata(record)), f"{self._traces}/{self.shard_file(index)}")

    def _write(self, data: bytes, path: str) -> None:
        """Writes ``data`` to ``path`` whole or not at all (see the module doc)."""
        if self.remote:  # an object appears whole when its upload completes, or not at all
            with self._fs.open_output_stream(path) as stream:
                stream.write(data)
            return
        write_private(Path(path), data)

    def read_shard(self, index: int) -> tuple[pa.Table, pa.Table]:
        """The answers and traces of a finished shard (only it is checked: a task reads its own shard)."""
        files = self._check(index)
        if isinstance(files, _Broken):
            raise ValueError(f"{self.uri}: shard {index} is not finished: {files.reason}")
        return (pq.read_table(f"{self._answers}/{files.answers}", schema=ANSWER_SCHEMA, filesystem=self._fs),
                pq.read_table(f"{self._traces}/{self.shard_file(index)}", schema=TRACE_SCHEMA, filesystem=self._fs))

    def read_traces(self, columns: list[str] | None = None) -> pa.Table:
        """All finished shards' trace rows."""
        return self._read(answers=False, columns=columns)

    def read_answers(self, columns: list[str] | None = None) -> pa.Table:
        """All finished shards' answer rows (an unfinished shard's answers file is left out)."""
        return self._read(answers=True, columns=columns)

    def count_answers(self) -> int:
        """How many answer rows the finished shards hold, from the Parquet footers (decodes no rows:
        a large job's driver stays small)."""
        return sum(s.answer_rows for s in self.shards().values())

    def trace_shards(self, columns: list[str] | None = None) -> Iterator[pa.Table]:
        """Each finished shard's trace rows, one shard at a time."""
        return self._shards(answers=False, columns=columns)

    def _read(self, *, answers: bool, columns: list[str] | None) -> pa.Table:
        tables = list(self._shards(answers=answers, columns=columns))
        schema = _columns(ANSWER_SCHEMA if answers else TRACE_SCHEMA, columns)
        return pa.concat_tables(tables) if tables else schema.empty_table()

    def _shards(self, *, answers: bool, columns: list[str] | None) -> Iterator[pa.Table]:
        schema = _columns(ANSWER_SCHEMA if answers else TRACE_SCHEMA, columns)
        for index, files in sorted(self.shards().items()):
            path = f"{self._answers}/{files.answers}" if answers else f"{self._traces}/{self.shard_file(index)}"
            yield pq.read_table(path, columns=columns, schema=schema, filesystem=self._fs)

    def failed(self, index: int) -> set[str]:
        """Ids of the questions of a finished shard whose trace has an error other than bad input."""
        traces = pq.read_table(f"{self._traces}/{self.shard_file(index)}", filesystem=self._fs,
                               columns=["question_id", "error", "error_step"])
        errors = pc.and_(pc.is_valid(traces["error"]),
                         pc.fill_null(pc.not_equal(traces["error_step"], "input"), True))
        return set(traces.filter(errors)["question_id"].to_pylist())

    def move_previous(self) -> str | None:
        """Moves the shard files and the manifest of the job the folder holds to ``previous-<time>/`` (a run
        folder of its own, read as any), so that a fresh start throws no finished work away; says where (also
        as a warning). ``None``: there was nothing to move."""
        shards = [info for folder, pattern in ((self._answers, _ANSWERS), (self._traces, _TRACES))
                  for info in self._list(folder) if pattern.fullmatch(info.base_name)]
        manifest = self._fs.get_file_info(self._manifest).type == pafs.FileType.File
        if not shards and not manifest:
            return None
        name = f"previous-{_stamp()}"
        self._make_dirs(name, f"{name}/answers", f"{name}/traces")
        for info in shards:
            self._fs.move(info.path, f"{self._base}/{name}/{Path(info.path).parent.name}/{info.base_name}")
        if manifest:
            self._fs.move(self._manifest, f"{self._base}/{name}/manifest.json")
        traces = sum(1 for info in shards if Path(info.path).parent.name == "traces")
        log.warning("%s: --no-resume: the previous run's %d shards%s are moved to %s/%s (delete it when it is no "
                    "longer needed)", self.uri, traces, " and its manifest" if manifest else "", self.uri, name)
        return f"{self.uri}/{name}"

    def set_aside(self) -> list[SetAside]:
        """Moves the shards that do not read back whole to ``set-aside/`` (so that they are recomputed),
        each with its answers file if that is there; says which and why (also as warnings)."""
        moved: list[SetAside] = []
        for index, checked in sorted(self._scan().items()):
            if isinstance(checked, ShardFiles):
                continue
            target = self._aside()
            name = self.shard_file(index)
            for folder, file in (("traces", name), ("answers", checked.answers)):
                source = f"{self._base}/{folder}/{file}"
                if self._fs.get_file_info(source).type == pafs.FileType.File:
                    self._fs.move(source, f"{self._base}/{target}/{folder}-{file}")
            moved.append(SetAside(index, checked.reason, f"{self.uri}/{target}"))
            log.warning("%s: shard %d is set aside to %s and recomputed: %s", self.uri, index, moved[-1].moved_to,
                        checked.reason)
        return moved

    def _aside(self) -> str:
        """A new folder under ``set-aside/`` (relative to the run folder)."""
        target = f"set-aside/{_stamp()}"
        self._make_dirs("set-aside", target)
        return target

    def _make_dirs(self, *folders: str) -> None:
        """Creates ``folders`` (relative to the run folder, each in the one before it; local ones 0700)."""
        for folder in folders:
            if self.remote:
                self._fs.create_dir(f"{self._base}/{folder}", recursive=True)
            else:
                Path(self._base, folder).mkdir(mode=0o700, exist_ok=True)

    def remove_temporaries(self) -> None:
        """Removes what no finished shard needs: temporary files (the manifest's too) and answers files
        that no finished shard names (an attempt that did not commit). Only while holding :meth:`lock`."""
        named = {s.answers for s in self.shards().values()}
        for info in self._list(self._answers):
            if info.base_name.startswith(TMP) or (_ANSWERS.fullmatch(info.base_name)
                                                   and info.base_name not in named):
                self._delete(info.path)
            elif _ANSWERS.fullmatch(info.base_name) is None:
                self._warn(f"answers/{info.base_name}", "not a shard file: ignored")
        for folder in (self._traces, self._base):
            for info in self._list(folder):
                if info.base_name.startswith(TMP):
                    self._delete(info.path)

    def read_manifest(self) -> dict[str, Any] | None:
        """The manifest; ``None`` when there is none yet; :class:`ValueError` when it is not a JSON object."""
        try:
            with self._fs.open_input_stream(self._manifest) as stream:
                text = stream.read()
        except FileNotFoundError:
            return None
        manifest = json.loads(text)
        if not isinstance(manifest, dict):
            raise ValueError(f"it holds a JSON {type(manifest).__name__}")
        return manifest

    def job_manifest(self) -> tuple[dict[str, Any] | None, list[SetAside]]:
        """The manifest of the job the folder holds (``None``: none yet). One that is not a JSON object is set
        aside to ``set-aside/`` as a damaged shard is, with a warning, and taken as missing: the finished shards
        are kept, as in a folder without a manifest."""
        try:
            return self.read_manifest(), []
        except ValueError as err:
            reason = f"it is not a JSON object ({_first_line(err)})"
        target = self._aside()
        self._fs.move(self._manifest, f"{self._base}/{target}/manifest.json")
        moved = SetAside(None, reason, f"{self.uri}/{target}")
        log.warning("%s: manifest.json is set aside to %s: %s; the run goes on as in a folder without one",
                    self.uri, moved.moved_to, reason)
        return None, [moved]

    def manifest_or_empty(self) -> dict[str, Any]:
        """The manifest for readers of a finished run: ``{}`` when it is missing or unreadable."""
        try:
            return self.read_manifest() or {}
        except (OSError, ValueError):
            return {}

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        text = (json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n").encode()
        if self.remote:
            with self._fs.open_output_stream(self._manifest) as stream:
                stream.write(text)
            return
        write_private(Path(self._manifest), text)

    def _list(self, folder: str) -> list[pafs.FileInfo]:
        """The files directly in ``folder`` (none when it does not exist)."""
        selector = pafs.FileSelector(folder, allow_not_found=True)
        return [i for i in self._fs.get_file_info(selector) if i.type == pafs.FileType.File]

    def _delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._fs.delete_file(path)


def _parquet(table: pa.Table) -> bytes:
    """``table`` as the bytes of a Parquet file."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue())


def _footer_size(data: bytes) -> int:
    """The size of the footer of the Parquet file ``data``, before its last 8 bytes (its size and magic)."""
    return int.from_bytes(data[-8:-4], "little")


def _stamp() -> str:
    """A new folder name for now: UTC time and a random suffix."""
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"


def _columns(schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    """``schema`` cut to ``columns`` (all of it for ``None``)."""
    return schema if columns is None else pa.schema([schema.field(c) for c in columns])


def _first_line(err: BaseException) -> str:
    return str(err).partition("\n")[0]
