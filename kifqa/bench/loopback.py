"""A threaded HTTP server on 127.0.0.1: the WDQS-like endpoint's, and the tests' own servers (a model server,
a fault proxy)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self, cast


class LoopbackServer:
    """Serves ``handler`` on 127.0.0.1 (a free port) from a daemon thread while used as a context manager,
    and counts the requests in flight (:meth:`in_flight_request`) and their peak."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, name: str, port: int = 0,
                 server_class: Callable[[tuple[str, int], type[BaseHTTPRequestHandler]], ThreadingHTTPServer]
                 = ThreadingHTTPServer) -> None:
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = server_class(("127.0.0.1", port), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=name, daemon=True)

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host, port = cast(tuple[str, int], self._httpd.server_address[:2])
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        """Starts serving."""
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stops serving and closes the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()

    @contextmanager
    def in_flight_request(self) -> Iterator[Callable[[], None]]:
        """Counts one request in flight while the block runs, or until it calls the function it gets:
        a handler calls it just before it writes the answer, since its client may send the next request
        as soon as it has read the answer, before the handler's block has ended."""
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        counting = True

        def answered() -> None:
            nonlocal counting
            with self._lock:
                if counting:
                    self.in_flight -= 1
                    counting = False

        try:
            yield answered
        finally:
            answered()


def reply(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: Mapping[str, str]) -> None:
    """Sends ``status``, ``headers`` and ``body`` (its length given); a client that hung up first ends the
    connection instead of raising in the server's thread."""
    try:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True
