"""One run at a time per run folder: an advisory lock on a local disk, a lease on an object store.

On a local disk the lock is ``fcntl.flock`` on ``<folder>/.lock``: the kernel drops it when its holder
ends, however it ends. An object store has no locks, so a run holds a lease instead: the object
``<folder>/lease.json`` names its holder (an id, host and pid) and an expiry, which a thread renews while
the run lasts. Another run stops at a lease that is not expired, unless its holder is a process of this
host that is gone (a killed driver). Object stores offer no atomic create here, so a run writes its
lease and reads it back after :data:`SETTLE_S`: of two runs that start together, the one whose lease
was written last goes on, and the other stops.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from kifqa.errors import ConfigError

log = logging.getLogger(__name__)

#: Seconds a lease lasts unless renewed (it is renewed every third of that).
LEASE_S = 60.0
#: Seconds between writing a lease and reading it back to see who holds it.
SETTLE_S = 1.0


class FolderInUse(ConfigError):
    """Another run holds the run folder."""


@dataclass(frozen=True)
class Holder:
    """Who holds a run folder: a run's id, host and process, and (a lease) until when."""

    owner: str
    host: str
    pid: int
    since: float
    expires: float | None = None

    @classmethod
    def parse(cls, text: bytes | str) -> Holder | None:
        try:
            data = json.loads(text)
            return cls(str(data["owner"]), str(data["host"]), int(data["pid"]), float(data["since"]),
                       None if data.get("expires") is None else float(data["expires"]))
        except (ValueError, KeyError, TypeError):
            return None

    def dumps(self) -> bytes:
        return json.dumps(self.__dict__).encode()

    def gone(self) -> bool:
        """Whether this holder is a process of this host that no longer runs."""
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def said(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since))
        return f"pid {self.pid} on {self.host}, since {when}"


def in_use(where: str, holder: Holder | None) -> FolderInUse:
    who = f" ({holder.said()})" if holder is not None else ""
    return FolderInUse(f"{where} is in use by another run{who}: wait for it to end, or write to another "
                       "output folder (--out); --no-resume does not take a folder another run holds")


@contextlib.contextmanager
def local_lock(folder: Path, where: str) -> Any:
    """Holds ``folder/.lock`` while the block runs; :class:`FolderInUse` when another process holds it."""
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise in_use(where, Holder.parse(os.pread(fd, 4096, 0))) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, Holder(uuid.uuid4().hex, socket.gethostname(), os.getpid(), time.time()).dumps(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class Lease:
    """A run's lease on a folder of an object store (see the module doc)."""

    def __init__(self, fs: pafs.FileSystem, path: str, where: str, *, lease_s: float = LEASE_S,
                 settle_s: float = SETTLE_S) -> None:
        self._fs, self._path, self._where = fs, path, where
        self._lease_s, self._settle_s = lease_s, settle_s
        self._owner = uuid.uuid4().hex
        self._since = time.time()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> Lease:
        held = self._read()
        if held is not None and held.owner != self._owner and not self._expired(held):
            raise in_use(self._where, held)
        self._write()
        time.sleep(self._settle_s)
        held = self._read()
        if held is None or held.owner != self._owner:
            raise in_use(self._where, held)
        self._renewer = threading.Thread(target=self._renew, name="kifqa-lease", daemon=True)
        self._renewer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        held = self._read()
        if held is not None and held.owner == self._owner:
            with contextlib.suppress(OSError):
                self._fs.delete_file(self._path)

    @staticmethod
    def _expired(held: Holder) -> bool:
        return (held.expires is not None and held.expires < time.time()) or held.gone()

    def _read(self) -> Holder | None:
        try:
            with self._fs.open_input_stream(self._path) as stream:
                return Holder.parse(stream.read())
        except FileNotFoundError:
            return None

    def _write(self) -> None:
        with self._fs.open_output_stream(self._path) as stream:
            stream.write(Holder(self._owner, socket.gethostname(), os.getpid(), self._since,
                                time.time() + self._lease_s).dumps())

    def _renew(self) -> None:
        while not self._stop.wait(self._lease_s / 3):
            try:
                held = self._read()
                if held is not None and held.owner != self._owner:  # it expired while the store was unreachable
                    log.error("the lease on %s was taken over by another run (%s): two runs now write to it",
                              self._where, held.said())
                    return
                self._write()
            except OSError as err:  # the store is unreachable for now: try again at the next renewal
                log.warning("could not renew the lease on %s: %s", self._where, err)
