"""A fault-injecting HTTP proxy for tests: put it in front of a real SPARQL server or model server.

``FaultProxy(upstream, faults, seed=...)`` listens on 127.0.0.1 on a free port (a stdlib
``ThreadingHTTPServer`` in a background thread) and forwards each request to ``upstream`` — unless
a seeded draw picks a fault for it, with the per-request probabilities of :class:`Faults`:

=============  ==================================================================================
``throttle``   HTTP 429 with ``Retry-After: <retry_after_s>``
``unavailable`` HTTP 503
``reset``      the connection is reset (TCP RST) once the request is read
``hang``       no answer until the client gives up (or ``hang_s`` passes): a delay past its timeout
``bad_body``   HTTP 200 whose body is an HTML error page, not JSON
``cut_body``   HTTP 200 with the upstream's body cut in half (consistent ``Content-Length``)
``max_rows``   HTTP 200 with half the upstream's SPARQL rows and ``X-SPARQL-MaxRows`` (Virtuoso's
               row limit): a silently truncated result
=============  ==================================================================================

``down = True`` resets every connection (an endpoint that is gone); ``poison = TEXT`` answers HTTP 400
to every request whose body or URL holds TEXT (URL-decoded): a lookup the endpoint rejects; ``required = (TEXT, ...)``
answers HTTP 401 to every request whose URL and ``Authorization`` header lack one of them: an endpoint with
credentials. The proxy counts requests, faults
by kind and the highest number of requests in flight (a request stops counting just before its answer
or reset is written, since its client may send the next one as soon as it has read it; a hung request
when its client disconnects), and logs the time of each request and of each 429, so tests can check that no request
arrived while a ``Retry-After`` was running (:meth:`FaultProxy.retry_after_violations`).
"""

from __future__ import annotations

import json
import random
import select
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote_plus, urlsplit

import httpx

from kifqa.bench.loopback import LoopbackServer

#: Request headers passed upstream.
_FORWARDED = ("content-type", "accept", "authorization", "user-agent")


@dataclass(frozen=True)
class Faults:
    """Per-request fault probabilities (their sum must be at most 1) and fault parameters."""

    throttle: float = 0.0
    unavailable: float = 0.0
    reset: float = 0.0
    hang: float = 0.0
    bad_body: float = 0.0
    cut_body: float = 0.0
    max_rows: float = 0.0
    #: The ``Retry-After`` of a 429, in seconds.
    retry_after_s: int = 1
    #: Longest a hung request is held (it ends earlier when the client disconnects).
    hang_s: float = 30.0

    @property
    def kinds(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("retry_after_s", "hang_s")}


@dataclass(frozen=True)
class Request:
    """One request as the proxy saw it."""

    #: When its connection was accepted (the earliest the proxy can know of it).
    arrived: float
    method: str
    path: str
    #: The fault it got, or ``"ok"`` when it was forwarded untouched.
    fault: str


class FaultProxy(LoopbackServer):
    """A fault-injecting proxy in front of ``upstream``; use as a context manager."""

    def __init__(self, upstream: str, faults: Faults = Faults(), *, seed: int = 0) -> None:
        if sum(faults.kinds.values()) > 1:
            raise ValueError("fault probabilities add up to more than 1")
        parts = urlsplit(upstream)
        self.upstream = f"{parts.scheme}://{parts.netloc}"
        self._path = parts.path
        self.faults = faults
        self.down = False
        self.poison: str | None = None
        self.required: tuple[str, ...] = ()
        self.requests: list[Request] = []
        #: (time the 429 was sent, its Retry-After in seconds)
        self.throttled: list[tuple[float, float]] = []
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._client = httpx.Client(timeout=60.0)
        super().__init__(self._handler(), name="fault-proxy", server_class=_Server)

    @property
    def url(self) -> str:
        """The proxied URL of ``upstream`` (same path, the proxy's host and port)."""
        return f"{self.origin}{self._path}"

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._client.close()

    def retry_after_violations(self, *, grace_s: float = 0.25) -> list[tuple[float, Request]]:
        """Requests that arrived while a ``Retry-After`` ran, as (seconds after the 429, request);
        requests arriving within ``grace_s`` of a 429 are not counted (they were sent before the
        client could read it)."""
        return [(r.arrived - sent, r) for sent, wait in self.throttled for r in self.requests
                if sent + grace_s < r.arrived < sent + wait - 0.01]

    # -- internals -------------------------------------------------------------

    def _draw(self, path: str = "", body: bytes = b"", authorization: str = "") -> str:
        with self._lock:
            if self.down:
                return "reset"
            if any(text not in f"{unquote_plus(path)} {authorization}" for text in self.required):
                return "unauthorized"
            if self.poison and self.poison in unquote_plus(path + "?" + body.decode("utf-8", "replace")):
                return "poison"
            x, total = self._rng.random(), 0.0
            for kind, p in self.faults.kinds.items():
                total += p
                if x < total:
                    return kind
            return "ok"

    @contextmanager
    def _track(self, arrived: float, method: str, path: str, fault: str) -> Iterator[Callable[[], None]]:
        """Logs the request and counts it in flight until the block ends or calls the function it gets."""
        with self._lock:
            self.requests.append(Request(arrived, method, path, fault))
            self.counts[fault] += 1
        with self.in_flight_request() as answered:
            yield answered

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> httpx.Response:
        sent = {k: v for k, v in headers.items() if k.lower() in _FORWARDED}
        return self._client.request(method, self.upstream + path, headers=sent, content=body)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                self._proxy()

            def do_POST(self) -> None:
                self._proxy()

            def _proxy(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                fault = proxy._draw(self.path, body, self.headers.get("Authorization", ""))
                arrived = proxy._httpd.accepted.pop(self.request, time.monotonic())
                with proxy._track(arrived, self.command, self.path, fault) as self.answered:
                    if fault == "reset":
                        self._reset()
                    elif fault == "hang":
                        self._hang(proxy.faults.hang_s)
                    elif fault == "throttle":
                        wait = proxy.faults.retry_after_s
                        self._send(429, b'{"error": "too many requests"}', {"Retry-After": str(wait)})
                        with proxy._lock:
                            proxy.throttled.append((time.monotonic(), float(wait)))
                    elif fault == "poison":
                        self._send(400, b"MalformedQueryException: rejected", {"Content-Type": "text/plain"})
                    elif fault == "unauthorized":
                        self._send(401, b"credentials required", {"Content-Type": "text/plain"})
                    elif fault == "unavailable":
                        self._send(503, b"<html><body>503 Service Unavailable</body></html>",
                                   {"Content-Type": "text/html"})
                    elif fault == "bad_body":
                        self._send(200, b"<html><body>upstream hiccup</body></html>")
                    else:
                        self._answer(fault, body)

            def _answer(self, fault: str, body: bytes) -> None:
                try:
                    upstream = proxy._forward(self.command, self.path, dict(self.headers), body)
                except httpx.HTTPError as err:
                    self._send(502, f"proxy: upstream failed: {err}".encode(), {"Content-Type": "text/plain"})
                    return
                content, extra = upstream.content, {}
                if fault == "cut_body":
                    content = content[: len(content) // 2]
                elif fault == "max_rows":
                    content, extra = _cut_rows(content)
                headers = {"Content-Type": upstream.headers.get("content-type", "application/json"), **extra}
                self._send(upstream.status_code, content, headers)

            def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                headers = {"Content-Type": "application/json", **(headers or {})}
                self.answered()
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

            def _reset(self) -> None:
                self.answered()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True

            def _hang(self, seconds: float) -> None:
                """Answers nothing until the client closes the connection (or ``seconds`` pass)."""
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    readable, _, _ = select.select([self.connection], [], [], 0.05)
                    try:
                        if readable and not self.connection.recv(1, socket.MSG_PEEK):
                            break  # the client gave up
                    except OSError:
                        break
                self._reset()

        return Handler


class _Server(ThreadingHTTPServer):
    """Notes when each connection is accepted, before a thread is started for it."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.accepted: dict[socket.socket, float] = {}

    def process_request(self, request: Any, client_address: Any) -> None:
        self.accepted[request] = time.monotonic()
        super().process_request(request, client_address)


def _cut_rows(content: bytes) -> tuple[bytes, dict[str, str]]:
    """Half the rows of a SPARQL JSON result, with the header Virtuoso sends at its row limit."""
    try:
        data = json.loads(content)
        rows = data["results"]["bindings"]
    except (ValueError, KeyError, TypeError):
        return content, {}
    data["results"]["bindings"] = rows[: len(rows) // 2]
    return json.dumps(data).encode(), {"X-SPARQL-MaxRows": str(len(rows) // 2)}
