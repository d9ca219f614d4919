"""Where corpora and run folders live: a local path, or a URI that one of pyarrow's file systems opens
(``s3://bucket/key``, ``gs://bucket/key``, ``hdfs://...``).

Local paths are read and written with the operating system's calls (``fsync``, ``rename``, ``flock``);
a URI goes through :func:`pyarrow.fs.FileSystem.from_uri`, which finds credentials where the cloud's own
tools do: for S3 (pyarrow reads them itself) the environment's ``AWS_ENDPOINT_URL`` /
``AWS_ENDPOINT_URL_S3`` (an S3-compatible server), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, then ``~/.aws`` and the instance
profile. Credentials are never part of what kifqa records: :func:`shown` strips them from a URI.
"""

from __future__ import annotations

import contextlib
import io
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.fs as pafs

from kifqa.errors import ConfigError


def is_uri(where: str | Path) -> bool:
    """Whether ``where`` names a file system other than this machine's disk (``file://`` is local)."""
    return isinstance(where, str) and "://" in where and not where.startswith("file://")


def local_path(where: str | Path) -> Path:
    """The absolute local path of ``where`` (a path or a ``file://`` URI)."""
    if isinstance(where, str) and where.startswith("file://"):
        where = urlsplit(where).path
    return Path(where).absolute()


def resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    """The file system of ``uri`` and the path inside it (no trailing ``/``); :class:`ConfigError` when
    pyarrow cannot open it."""
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, OSError, ValueError) as err:
        raise ConfigError(f"{shown(uri)}: cannot open this location ({err}); use a local path or a URI "
                          "that pyarrow opens (s3://bucket/key, gs://bucket/key)") from None
    return fs, path.rstrip("/")


def shown(where: str | Path) -> str:
    """``where`` as kifqa writes it into manifests, summaries and messages: a URI without user,
    password or query (where credentials may be given)."""
    if not is_uri(where):
        return str(local_path(where))
    parts = urlsplit(str(where))
    return urlunsplit((parts.scheme, parts.hostname or "", parts.path, "", ""))


def open_input(where: str | Path) -> BinaryIO:
    """``where`` opened for buffered binary reading (seekable)."""
    if not is_uri(where):
        return local_path(where).open("rb")
    fs, path = resolve(str(where))
    return io.BufferedReader(_Raw(fs.open_input_file(path)), buffer_size=1 << 20)


def stamp(where: str | Path) -> tuple[int, int] | None:
    """The size and modification time (ns) of the file ``where``; ``None`` when there is no such file."""
    if not is_uri(where):
        local = local_path(where)
        if not local.is_file():
            return None
        info = local.stat()
        return info.st_size, info.st_mtime_ns
    fs, path = resolve(str(where))
    found = fs.get_file_info(path)
    if found.type != pafs.FileType.File:
        return None
    return found.size or 0, found.mtime_ns or 0


def write_file(where: str | Path, data: bytes) -> None:
    """``data`` as the file ``where``, whole or not at all: a local file through a fresh temporary file beside it,
    synced and renamed into place (readable by its owner only); at a URI as one object (an object store shows an
    object only once it is whole)."""
    if is_uri(where):
        fs, path = resolve(str(where))
        parent = path.rsplit("/", 1)[0]
        if parent and parent != path:
            fs.create_dir(parent, recursive=True)
        with fs.open_output_stream(path) as stream:
            stream.write(data)
        return
    target = local_path(where)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_private(target, data)


#: The prefix of a file being written: readers and listings pass over it, a sweep removes it.
TMP = ".tmp-"


def write_private(path: Path, data: bytes) -> None:
    """Writes ``data`` to ``path`` on a local disk: under a unique temporary name in its folder, mode 0600,
    fsynced, renamed into place and the folder fsynced (a crash leaves the old file or the new one whole, and no
    reader ever sees a part)."""
    tmp = path.with_name(f"{TMP}{uuid.uuid4().hex}-{path.name}")
    try:
        with private_output(tmp) as out:
            out.write(data)
        os.replace(tmp, path)
        fsync_folder(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def private_output(path: Path) -> Iterator[Any]:
    """``path`` created for writing, mode 0600, fsynced when the block ends."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        yield out
        out.flush()
        os.fsync(out.fileno())


def fsync_folder(folder: Path) -> None:
    """Makes a rename in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Raw(io.RawIOBase):
    """A pyarrow input file as a Python raw stream (pyarrow's own files do not read lines)."""

    def __init__(self, file: pa.NativeFile) -> None:
        self._file = file

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._file.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()
        super().close()
