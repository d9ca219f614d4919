"""Running ``oxigraph serve-read-only`` on a built store: :class:`OxigraphServer` starts it, waits until it
answers SPARQL, and stops it. Query it with KIF's ``wikidata-sparql`` store at :attr:`OxigraphServer.url`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import httpx

from kifqa.errors import KBError


def oxigraph_binary() -> str:
    """The ``oxigraph`` executable: next to this Python (the venv), else on ``PATH``."""
    local = Path(sys.executable).parent / "oxigraph"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which("oxigraph")
    if found is None:
        raise KBError("the `oxigraph` server binary is not installed (pip install oxigraph)")
    return found


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no conflict
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def stop_process(process: subprocess.Popen[bytes], *, timeout_s: float) -> None:
    """Stops a server process: SIGTERM, then SIGKILL if it is still there after ``timeout_s``."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def cpu_seconds(pid: int) -> float | None:
    """The CPU time process ``pid`` has used so far (user and system), where ``/proc`` tells (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until(ready: Callable[[], bool], process: subprocess.Popen[bytes], *, timeout_s: float,
               failed: Callable[[str], Exception], poll_s: float = 0.1) -> None:
    """Waits until ``ready()`` while ``process`` works towards it. ``timeout_s`` is counted in the process's own
    CPU seconds where ``/proc`` tells, so a machine busy with other work stretches the wait but does not end it;
    it also ends once the process has used no CPU for ``timeout_s`` of wall time (it is stuck), and elsewhere
    after ``timeout_s`` of wall time. Raises ``failed(reason)`` when the wait ends or ``process`` exits first."""
    start = cpu_seconds(process.pid)
    used = 0.0
    progressed = time.monotonic()
    while not ready():
        if process.poll() is not None:
            raise failed(f"it exited with status {process.returncode}")
        now = cpu_seconds(process.pid) if start is not None else None
        if now is not None and start is not None and now - start > used:
            used, progressed = now - start, time.monotonic()
        if used > timeout_s:
            raise failed(f"it used {used:.0f} s of CPU without getting there (limit {timeout_s:g} s)")
        if time.monotonic() - progressed > timeout_s:
            raise failed(f"{timeout_s:g} s passed with no work done" if start is not None
                         else f"{timeout_s:g} s passed")
        time.sleep(poll_s)


class OxigraphServer:
    """An ``oxigraph serve-read-only`` process over ``store_dir`` on ``host:port`` (a free port by default).

    Use as a context manager, or call :meth:`start` and :meth:`stop`. The start may take ``startup_timeout_s``
    of the server's CPU time (:func:`wait_until`).
    """

    def __init__(self, store_dir: Path, *, port: int | None = None, host: str = "127.0.0.1",
                 startup_timeout_s: float = 30.0) -> None:
        self.store_dir = store_dir
        self.host = host
        self.port = port or free_port(host)
        self.startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # the server's output, for error messages

    @property
    def url(self) -> str:
        """The SPARQL query endpoint."""
        return f"http://{self.host}:{self.port}/query"

    def start(self) -> OxigraphServer:
        """Starts the server and waits until it answers; :class:`KBError` if it does not."""
        if not self.store_dir.is_dir():
            raise KBError(f"no Oxigraph store at {self.store_dir}; run `kifqa kb build`")
        if not port_is_free(self.host, self.port):
            raise KBError(f"port {self.port} on {self.host} is already in use; pick another with --port")
        self._process = subprocess.Popen(
            [oxigraph_binary(), "serve-read-only", "--location", str(self.store_dir),
             "--bind", f"{self.host}:{self.port}"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            wait_until(self._answers, self._process, timeout_s=self.startup_timeout_s, poll_s=0.05,
                       failed=lambda why: KBError(f"oxigraph server did not answer on {self.url}: {why}: "
                                                  f"{self._output()}"))
        except KBError:
            self.stop()
            raise
        return self

    def _answers(self) -> bool:
        try:
            return httpx.get(self.url, params={"query": "ASK {}"}, timeout=1.0).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        """Stops the server (politely, then by force)."""
        if self._process is None:
            return
        stop_process(self._process, timeout_s=5)
        self._process = None

    def wait(self) -> int:
        """Waits until the server exits; returns its status."""
        assert self._process is not None, "server not started"
        return self._process.wait()

    def _output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip()[-2000:] or "(no output)"

    def __enter__(self) -> OxigraphServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
