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


class OxigraphServer:
    """An ``oxigraph serve-read-only`` process over ``store_dir`` on ``host:port`` (a free port by default).

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
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
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                status, self._process = self._process.returncode, None
                raise KBError(f"oxigraph server exited with status {status}: {self._output()}")
            try:
                if httpx.get(self.url, params={"query": "ASK {}"}, timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise KBError(f"oxigraph server did not answer on {self.url} within {self.startup_timeout_s:g} s: "
                      f"{self._output()}")

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
