"""A SPARQL endpoint with the Wikidata Query Service's published rules, in front of a local one.

:class:`WDQSLike` listens on 127.0.0.1 only (a free port by default) and forwards SPARQL requests to
``upstream`` (e.g. the :class:`~kifqa.kb.server.OxigraphServer` of the local build), enforcing per
client (its ``User-Agent``) what WDQS documents:

- **a query-time budget**: ``budget_s`` seconds of query time per ``budget_s`` seconds, with bursts
  to ``burst_s``; each query is charged ``charge_s`` plus the upstream's own time;
- **a concurrency cap**: at most ``max_concurrent`` queries of a client running at once;
- **429 with Retry-After** beyond either (the time until the budget is positive again, at least 1 s);
- **a deadline**: a query running past ``deadline_s`` is answered 500 (WDQS's timeout);
- **added latency**: every answer waits ``latency_s`` (a round trip to a remote service);
- **DBpedia's row cut** (``max_rows``, e.g. 10,000): a longer result is cut and says so in
  ``X-SPARQL-MaxRows``, as Virtuoso does;
- **WDQS's dialect** (``dialect="blazegraph"``): the queries KIF's ``wdqs`` store sends (Blazegraph's named
  subqueries, ``wikibase:isSomeValue``) are taken as they come, counted, and rewritten into standard SPARQL for
  the upstream (:mod:`kifqa.bench.standins.blazegraph`);
- **a standard mirror's refusal** (``dialect="strict"``): a query in Blazegraph's dialect is answered 400, as a
  SPARQL 1.1 mirror that knows no named subqueries or ``wikibase:`` functions (QLever) answers it.

It counts requests, 429s, charged seconds, and the requests of a client that arrived while a
Retry-After it had received was still running (:attr:`Counts.inside_retry_after`): what gets a client
banned from the real WDQS. At most ``max_connections`` connections are served at once (the rest wait
in the listen backlog), so it is bounded however hard a client pushes.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import httpx

from kifqa.bench.loopback import LoopbackServer, reply
from kifqa.bench.standins import blazegraph
from kifqa.bench.standins.ledger import Ledger
from kifqa.errors import KBError

#: Request headers passed upstream.
_FORWARDED = ("content-type", "accept", "user-agent")


@dataclass
class Counts:
    """What the endpoint saw."""

    requests: int = 0
    #: Requests answered (with the upstream's answer, cut or not).
    answered: int = 0
    throttled: int = 0
    timeouts: int = 0
    cut: int = 0
    charged_s: float = 0.0
    #: Requests that arrived while a Retry-After their client had received still ran.
    inside_retry_after: int = 0
    #: Most queries of one client running at once.
    max_running: int = 0
    #: Queries in Blazegraph's dialect (``dialect="blazegraph"``), rewritten for the upstream.
    blazegraph: int = 0
    #: Queries in Blazegraph's dialect refused (``dialect="strict"``).
    refused_dialect: int = 0


@dataclass
class _Client:
    budget: float
    updated: float
    running: int = 0


class WDQSLike(LoopbackServer):
    """WDQS's rules in front of ``upstream`` (a SPARQL endpoint URL); a context manager."""

    def __init__(self, upstream: str, *, budget_s: float = 60.0, burst_s: float = 120.0, charge_s: float = 0.2,
                 max_concurrent: int = 5, latency_s: float = 0.15, deadline_s: float = 60.0,
                 max_rows: int | None = None, grace_s: float = 0.25, max_connections: int = 64,
                 port: int = 0, dialect: Literal["standard", "blazegraph", "strict"] = "standard",
                 record: bool = False) -> None:
        parts = urlsplit(upstream)
        self._upstream = upstream
        self.path = parts.path or "/"
        self.budget_s, self.burst_s, self.charge_s = budget_s, burst_s, charge_s
        self.max_concurrent, self.latency_s, self.deadline_s = max_concurrent, latency_s, deadline_s
        self.max_rows = max_rows
        #: The Retry-After windows of each client (a request arriving within ``grace_s`` of its client's 429
        #: was sent before the client could read it).
        self.ledger = Ledger(grace_s=grace_s)
        self.dialect = dialect
        #: Every query text as it arrived (``record=True``).
        self.received: list[str] | None = [] if record else None
        self.counts = Counts()
        self._clients: dict[str, _Client] = {}
        self._lock = threading.Lock()
        self._http = httpx.Client(timeout=httpx.Timeout(deadline_s + 5.0),
                                  limits=httpx.Limits(max_connections=max_connections))
        super().__init__(self._handler(), name="wdqs-like", port=port,
                         server_class=lambda address, handler: _BoundedServer(address, handler, max_connections))

    @property
    def url(self) -> str:
        """The endpoint's SPARQL URL (the upstream's path on this server's host and port)."""
        return f"{self.origin}{self.path}"

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._http.close()

    @property
    def user_agents(self) -> set[str]:
        """The ``User-Agent`` of every client so far."""
        with self._lock:
            return {who.rpartition("@")[0] for who in self._clients}

    def reset_counts(self) -> Counts:
        """The counts so far; counting starts again from zero (the budgets are kept)."""
        with self._lock:
            counts, self.counts = self.counts, Counts()
        return counts

    # -- the rules -------------------------------------------------------------

    def _admit(self, who: str, now: float) -> float | None:
        """Starts a query of ``who`` (``None``), or the Retry-After of its 429."""
        with self._lock:
            c = self._clients.get(who)
            if c is None:
                c = self._clients[who] = _Client(budget=self.burst_s, updated=now)
            self.counts.requests += 1
            c.budget = min(self.burst_s, c.budget + (now - c.updated) * self.budget_s / 60.0)
            c.updated = now
            if self.ledger.arrived(who, now):
                self.counts.inside_retry_after += 1
            if c.budget <= 0:
                self.counts.throttled += 1
                return float(max(1, math.ceil(-c.budget * 60.0 / self.budget_s)))
            if c.running >= self.max_concurrent:
                self.counts.throttled += 1
                return 1.0
            c.running += 1
            self.counts.max_running = max(self.counts.max_running, c.running)
            return None

    def _finish(self, who: str, seconds: float) -> None:
        charge = self.charge_s + seconds
        with self._lock:
            c = self._clients[who]
            c.running -= 1
            c.budget -= charge
            self.counts.charged_s += charge

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> httpx.Response:
        target = self._upstream + path[len(self.path):] if path.startswith(self.path) else self._upstream
        sent = {k: v for k, v in headers.items() if k.lower() in _FORWARDED}
        query = _query_of(method, path, sent, body)
        if query is not None and self.received is not None:
            with self._lock:
                self.received.append(query)
        if query is not None and self.dialect == "strict" and blazegraph.is_blazegraph(query):
            with self._lock:
                self.counts.refused_dialect += 1
            raise KBError("Blazegraph's dialect (a named subquery or a wikibase: function) is not SPARQL 1.1")
        if query is not None and self.dialect == "blazegraph" and blazegraph.is_blazegraph(query):
            with self._lock:
                self.counts.blazegraph += 1
            sent = {k: v for k, v in sent.items() if k.lower() != "content-type"}
            sent["Content-Type"] = "application/sparql-query"
            target = target.partition("?")[0]
            return self._http.request("POST", target, headers=sent, content=blazegraph.to_standard(query).encode(),
                                      timeout=self.deadline_s)
        return self._http.request(method, target, headers=sent, content=body, timeout=self.deadline_s)

    def _cut(self, content: bytes) -> tuple[bytes, dict[str, str]]:
        """The result cut at ``max_rows``, with Virtuoso's header, when it is longer."""
        if self.max_rows is None:
            return content, {}
        try:
            data = json.loads(content)
            rows = data["results"]["bindings"]
        except (ValueError, KeyError, TypeError):
            return content, {}
        if len(rows) <= self.max_rows:
            return content, {}
        data["results"]["bindings"] = rows[:self.max_rows]
        with self._lock:
            self.counts.cut += 1
        return json.dumps(data).encode(), {"X-SPARQL-MaxRows": str(self.max_rows)}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                who = self.headers.get("User-Agent", "") + "@" + self.client_address[0]
                arrived = time.monotonic()
                retry_after = endpoint._admit(who, arrived)
                if retry_after is not None:
                    self._send(429, b"Too Many Requests - Please retry in %d seconds." % retry_after,
                               {"Retry-After": str(int(retry_after)), "Content-Type": "text/plain"})
                    endpoint.ledger.told_to_wait(who, retry_after)
                    return
                started = time.perf_counter()
                try:
                    upstream = endpoint._forward(self.command, self.path, dict(self.headers), body)
                except httpx.TimeoutException:
                    endpoint._finish(who, endpoint.deadline_s)
                    with endpoint._lock:
                        endpoint.counts.timeouts += 1
                    self._send(500, b"java.util.concurrent.TimeoutException", {"Content-Type": "text/plain"})
                    return
                except httpx.HTTPError as err:
                    endpoint._finish(who, time.perf_counter() - started)
                    self._send(502, f"upstream failed: {err}".encode(), {"Content-Type": "text/plain"})
                    return
                except KBError as err:  # a Blazegraph query it cannot read: Blazegraph's own answer is a 400
                    endpoint._finish(who, time.perf_counter() - started)
                    self._send(400, f"MalformedQueryException: {err}".encode(), {"Content-Type": "text/plain"})
                    return
                endpoint._finish(who, time.perf_counter() - started)
                content, extra = endpoint._cut(upstream.content)
                with endpoint._lock:
                    endpoint.counts.answered += 1
                headers = {"Content-Type": upstream.headers.get("content-type", "application/sparql-results+json"),
                           **extra}
                self._send(upstream.status_code, content, headers)

            def _send(self, status: int, data: bytes, headers: dict[str, str]) -> None:
                time.sleep(endpoint.latency_s)
                reply(self, status, data, headers)

        return Handler


class _BoundedServer(ThreadingHTTPServer):
    """Serves at most ``max_connections`` connections at once; further ones wait to be accepted."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_connections: int) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def _query_of(method: str, path: str, headers: dict[str, str], body: bytes) -> str | None:
    """The SPARQL query of a request: ``query`` of the URL (GET) or of a form, or a ``sparql-query`` body."""
    kind = next((v for k, v in headers.items() if k.lower() == "content-type"), "").partition(";")[0].strip()
    if method == "POST" and kind == "application/sparql-query":
        return body.decode("utf-8", "replace")
    source = body.decode("utf-8", "replace") if method == "POST" else urlsplit(path).query
    found = parse_qs(source).get("query")
    return found[0] if found else None
