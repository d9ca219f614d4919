"""A DBpedia-Lookup-like server (``/api/search``) over the label index of the DBpedia-encoded build, on 127.0.0.1.

It answers what KIF's ``dbpedia-lookup`` search asks (``query``, ``maxResults``, ``format=JSON``) in Lookup's
JSON shape: ``docs[]``, each field a list of strings (``resource``, ``label`` and ``comment`` with the matched
words in ``<B>``, ``score``, ``refCount``). Resources match as Lookup's Lucene queries match them
(:mod:`~kifqa.bench.standins.keywords`: every word of the query in the label or a redirect's, exactly, as a prefix
or misspelt). A per-client limit answers 429 with ``Retry-After`` beyond ``max_concurrent`` in flight or
``per_second``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kifqa.bench.loopback import LoopbackServer, reply
from kifqa.bench.standins.keywords import Keywords, Scored
from kifqa.bench.standins.ledger import ClientRate, Ledger
from kifqa.bench.standins.names import Names
from kifqa.kb import ids

#: Lookup's default ``maxResults``.
DEFAULT_MAX_RESULTS = 100


@dataclass
class LookupCounts:
    """What the Lookup stand-in saw."""

    requests: int = 0
    answered: int = 0
    throttled: int = 0
    #: Requests that arrived inside a ``Retry-After`` their client had been told of.
    inside_waits: int = 0
    max_in_flight: int = 0


class DBpediaLookupLike(LoopbackServer):
    """DBpedia Lookup's search over the label index at ``index_path``; a context manager. :attr:`url` is its
    ``/api/search``."""

    def __init__(self, index_path: Path, *, max_concurrent: int = 4, per_second: float = 20.0,
                 latency_s: float = 0.05, grace_s: float = 0.25, port: int = 0) -> None:
        self.names = Names(index_path)
        self.keywords = Keywords(self.names)
        self.latency_s = latency_s
        self.ledger = Ledger(grace_s=grace_s)
        self.rate = ClientRate(max_concurrent=max_concurrent, per_second=per_second, ledger=self.ledger)
        self.counts = LookupCounts()
        self.user_agents: set[str] = set()
        self._lock = threading.Lock()
        super().__init__(self._handler(), name="dbpedia-lookup-like", port=port)

    @property
    def url(self) -> str:
        return f"{self.origin}/api/search"

    def answer(self, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """Lookup's status and JSON answer to ``params``."""
        query = params.get("query", "")
        if params.get("format", "JSON").upper() != "JSON":
            return 400, {"error": "this stand-in answers format=JSON only"}
        try:
            limit = int(params.get("maxResults", DEFAULT_MAX_RESULTS))
        except ValueError:
            return 400, {"error": f"maxResults is not a number: {params.get('maxResults')}"}
        return 200, {"docs": [_doc(s) for s in self.keywords.search(query)[:max(0, limit)]]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        lookup = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path != "/api/search":
                    self._send(404, {"error": f"no such path: {parts.path}"}, {})
                    return
                params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
                agent = self.headers.get("User-Agent", "")
                who, now = agent + "@" + self.client_address[0], time.monotonic()
                with lookup._lock:
                    lookup.user_agents.add(agent)
                    lookup.counts.requests += 1
                    lookup.counts.inside_waits += lookup.ledger.arrived(who, now)
                if (wait := lookup.rate.admit(who, now)) is not None:
                    with lookup._lock:
                        lookup.counts.throttled += 1
                    self._send(429, {"error": "Too Many Requests"}, {"Retry-After": f"{wait:g}"})
                    return
                try:
                    status, answer = lookup.answer(params)
                finally:
                    lookup.rate.done(who)
                    with lookup._lock:
                        lookup.counts.answered += 1
                        lookup.counts.max_in_flight = lookup.rate.max_in_flight
                self._send(status, answer, {})

            def _send(self, status: int, data: dict[str, Any], headers: dict[str, str]) -> None:
                time.sleep(lookup.latency_s)
                reply(self, status, json.dumps(data).encode(), {"Content-Type": "application/json", **headers})

        return Handler


def _doc(scored: Scored) -> dict[str, list[str]]:
    """One Lookup doc: every field a list of strings, the matched name in ``<B>``."""
    m = scored.match
    e = m.entity
    doc = {"resource": [ids.to_iri(e.id)], "label": [f"<B>{e.label}</B>" if m.type == "label" else e.label],
           "score": [f"{scored.score:.4f}"], "refCount": [str(e.degree)]}
    if m.type == "alias":
        doc["redirectlabel"] = [f"<B>{m.text}</B>"]
    if e.description:
        doc["comment"] = [e.description]
    return doc
