"""A Wikidata-API-like server (``/w/api.php``) over a build's label index, on 127.0.0.1.

It answers what KIF's ``wikidata-wapi`` search and a user's scripts ask of the real API, in its JSON shapes:

- ``action=wbsearchentities`` (``search``, ``language``, ``type`` item or property, ``limit`` up to 50,
  ``continue``): ``search[]`` hits with ``id``, ``title``, ``pageid``, ``concepturi``, ``repository``, ``url``,
  ``display``, ``label``, ``description`` (where known), ``match`` and ``aliases`` (the matched alias),
  ``datatype`` for properties, and ``search-continue`` when there are more. Names match by prefix, case and
  accents folded; exact matches come first, then the most used entities (statements in the base);
- ``action=wbgetentities`` (``ids``, up to 50; ``props`` labels, aliases, descriptions, datatype and, given the
  build's SPARQL endpoint, ``claims``: its statements in the API's JSON shape, :mod:`~kifqa.bench.standins.claims`;
  English);
- ``action=query&list=search`` (CirrusSearch's full text, ``srsearch``, ``srlimit``, ``sroffset``): items whose
  names and description hold every word (``word~``: or a word within Elasticsearch's ``AUTO`` edit distance),
  more words as written first, then the most used; each hit's ``title`` is its id, ``snippet`` its description;
- ``maxlag``: while the simulated replication lag (:class:`Lag`) is above a request's ``maxlag``, the request
  gets MediaWiki's refusal: HTTP 200, ``MediaWiki-API-Error: maxlag``, ``Retry-After`` and an ``error`` of code
  ``maxlag``;
- a per-client limit (``User-Agent`` and address): ``max_concurrent`` requests in flight and ``per_second``
  (bursts of one second's worth); beyond either, HTTP 429 with ``Retry-After``.

It counts requests, refusals, requests without ``maxlag``, and requests sent inside a ``Retry-After`` or
``maxlag`` wait the client had been told of (:class:`~kifqa.bench.standins.ledger.Ledger`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kifqa.bench.loopback import LoopbackServer, reply
from kifqa.bench.standins.claims import Claims
from kifqa.bench.standins.ledger import ClientRate, Ledger
from kifqa.bench.standins.names import Match, Names
from kifqa.data.text import typed_key
from kifqa.kb import ids
from kifqa.kb.index import Entry

#: The real API's page size limit for ``wbsearchentities`` (and its default).
MAX_LIMIT, DEFAULT_LIMIT = 50, 7
#: Most ``ids`` of one ``wbgetentities`` request (the real API's limit for clients without ``apihighlimits``).
MAX_IDS = 50
#: Seconds MediaWiki asks a client refused for ``maxlag`` to wait.
MAXLAG_RETRY_AFTER_S = 5.0


@dataclass(frozen=True)
class Lag:
    """A simulated replication lag: ``lag_s`` seconds during the first ``for_s`` seconds of every ``every_s``
    seconds since the server's first request, none otherwise."""

    lag_s: float
    every_s: float
    for_s: float

    def at(self, elapsed_s: float) -> float:
        return self.lag_s if elapsed_s % self.every_s < self.for_s else 0.0


@dataclass
class APICounts:
    """What the API stand-in saw."""

    requests: int = 0
    answered: int = 0
    #: HTTP 429s (rate or concurrency).
    throttled: int = 0
    #: ``maxlag`` refusals.
    maxlag_refused: int = 0
    #: Requests without a ``maxlag`` parameter.
    without_maxlag: int = 0
    #: Requests that arrived inside a ``Retry-After`` or ``maxlag`` wait their client had been told of.
    inside_waits: int = 0
    #: Most requests of one client in flight at once.
    max_in_flight: int = 0
    #: Requests answered by action (``wbsearchentities``, ``wbgetentities``, ``query`` for the full text...).
    by_action: dict[str, int] = field(default_factory=dict)


class WikidataAPILike(LoopbackServer):
    """The Wikidata API's ``wbsearchentities``, ``wbgetentities``, ``maxlag`` and rate rules over the label
    index at ``index_path``; a context manager. :attr:`url` is its ``api.php``.

    Args:
        index_path: A build's label index (:attr:`~kifqa.kb.build.BuiltKB.index_path`).
        max_concurrent: Requests of one client in flight at once; beyond, 429.
        per_second: Requests of one client per second (bursts of one second's worth); beyond, 429.
        lag: The simulated replication lag (``None``: never lagged).
        latency_s: Added to every answer (a round trip to a remote service).
        maxlag_retry_after_s: The ``Retry-After`` of a ``maxlag`` refusal.
        mangle: Rewrites a ``wbsearchentities`` answer (the search text, the answer) before it is sent: a
            changed or broken format for tests.
        fulltext: Whether it serves ``list=search``; without, it answers MediaWiki's ``badvalue`` error, as a
            proxy or a partial mirror that refuses the full-text search may.
        statements: The SPARQL endpoint of the build the index belongs to: ``wbgetentities`` gives its
            statements as ``claims`` (``None``: no claims).
    """

    def __init__(self, index_path: Path, *, max_concurrent: int = 1, per_second: float = 10.0,
                 lag: Lag | None = None, latency_s: float = 0.05, grace_s: float = 0.25,
                 maxlag_retry_after_s: float = MAXLAG_RETRY_AFTER_S,
                 mangle: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None, fulltext: bool = True,
                 statements: str | None = None, port: int = 0) -> None:
        self.names = Names(index_path)
        self.claims = Claims(statements) if statements else None
        self.lag, self.latency_s, self.mangle, self.fulltext = lag, latency_s, mangle, fulltext
        self.maxlag_retry_after_s = maxlag_retry_after_s
        self.ledger = Ledger(grace_s=grace_s)
        self.rate = ClientRate(max_concurrent=max_concurrent, per_second=per_second, ledger=self.ledger)
        self.counts = APICounts()
        #: The ``User-Agent`` of every request.
        self.user_agents: set[str] = set()
        self._lock = threading.Lock()
        self._started: float | None = None
        super().__init__(self._handler(), name="wikidata-api-like", port=port)

    @property
    def url(self) -> str:
        return f"{self.origin}/w/api.php"

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if self.claims is not None:
            self.claims.close()

    def reset_counts(self) -> APICounts:
        """The counts so far; counting starts again from zero."""
        with self._lock:
            counts, self.counts = self.counts, APICounts()
            self.ledger.reset()
            self.rate.max_in_flight = 0
        return counts

    # -- the rules -------------------------------------------------------------

    def _admit(self, who: str, params: dict[str, str]) -> tuple[int, dict[str, str], dict[str, Any]] | None:
        """Starts a request of ``who`` (``None``), or the refusal it gets: (status, headers, JSON)."""
        now = time.monotonic()
        with self._lock:
            self.counts.requests += 1
            self.counts.inside_waits += self.ledger.arrived(who, now)
            if "maxlag" not in params:
                self.counts.without_maxlag += 1
            self._started = now if self._started is None else self._started
            lag = self.lag.at(now - self._started) if self.lag else 0.0
            maxlag = _number(params.get("maxlag"))
            if maxlag is not None and lag > maxlag:
                self.counts.maxlag_refused += 1
                self.ledger.told_to_wait(who, self.maxlag_retry_after_s)
                info = f"Waiting for 10.64.48.1: {lag:g} seconds lagged."
                return 200, {"Retry-After": f"{self.maxlag_retry_after_s:g}", "X-Database-Lag": f"{lag:g}",
                             "MediaWiki-API-Error": "maxlag"}, {
                    "error": {"code": "maxlag", "info": info, "host": "10.64.48.1", "lag": lag, "type": "db",
                              "*": "See https://www.wikidata.org/w/api.php for API usage."},
                    "servedby": "mw-api-ext.stand-in"}
            if (wait := self.rate.admit(who, now)) is not None:
                self.counts.throttled += 1
                return 429, {"Retry-After": f"{wait:g}"}, {"error": {"code": "ratelimited",
                                                                     "info": "Too many requests."}}
            self.counts.max_in_flight = self.rate.max_in_flight
            return None

    def _done(self, who: str, action: str) -> None:
        self.rate.done(who)
        with self._lock:
            self.counts.answered += 1
            self.counts.by_action[action] = self.counts.by_action.get(action, 0) + 1

    # -- the actions ---------------------------------------------------------

    def answer(self, params: dict[str, str]) -> dict[str, Any]:
        """The API's JSON answer to ``params`` (an ``error`` for what it does not serve)."""
        action = params.get("action", "")
        if action == "wbsearchentities":
            return self._search(params)
        if action == "wbgetentities":
            return self._entities(params)
        if action == "query" and params.get("list") == "search":
            return self._fulltext(params) if self.fulltext else _error(
                "badvalue", 'Unrecognized value for parameter "list": search.')
        return _error("badvalue", f'Unrecognized value for parameter "action": {action}.')

    def _search(self, params: dict[str, str]) -> dict[str, Any]:
        text = params.get("search")
        if text is None:
            return _error("missingparam", 'The "search" parameter must be set.')
        if "language" not in params:
            return _error("missingparam", 'The "language" parameter must be set.')
        kind = params.get("type", "item")
        if kind not in ("item", "property"):
            return _error("badvalue", f'Unrecognized value for parameter "type": {kind}.')
        limit = MAX_LIMIT if params.get("limit") == "max" else int(_number(params.get("limit")) or DEFAULT_LIMIT)
        if not 1 <= limit <= MAX_LIMIT:
            return _error("badinteger", f'Invalid value "{limit}" for integer parameter "limit".')
        offset = int(_number(params.get("continue")) or 0)
        matches = self.names.prefixed(kind, text) if params["language"] == "en" else []  # type: ignore[arg-type]
        page = matches[offset:offset + limit]
        answer: dict[str, Any] = {"searchinfo": {"search": text}, "search": [_hit(m) for m in page]}
        if offset + limit < len(matches):
            answer["search-continue"] = offset + limit
        answer["success"] = 1
        return self.mangle(text, answer) if self.mangle else answer

    def _fulltext(self, params: dict[str, str]) -> dict[str, Any]:
        text = params.get("srsearch")
        if not text:
            return _error("missingparam", 'The "srsearch" parameter must be set.')
        limit = int(_number(params.get("srlimit")) or 10)
        offset = int(_number(params.get("sroffset")) or 0)
        if not 1 <= limit <= 500:
            return _error("badinteger", f'Invalid value "{limit}" for integer parameter "srlimit".')
        terms = [(word, term.endswith("~")) for term in text.split()
                 for word in typed_key(term.rstrip("~0123456789") if "~" in term else term).split()]
        found = self.names.fulltext(terms)
        page = found[offset:offset + limit]
        answer: dict[str, Any] = {"batchcomplete": ""}
        if offset + limit < len(found):
            answer["continue"] = {"sroffset": offset + limit, "continue": "-||"}
        answer["query"] = {"searchinfo": {"totalhits": len(found)}, "search": [
            {"ns": 0, "title": e.id, "pageid": int(e.id[1:]) if e.id[1:].isdigit() else 0, "size": 1000,
             "wordcount": 0, "snippet": e.description, "timestamp": "2025-01-01T00:00:00Z"} for e in page]}
        return answer

    def _entities(self, params: dict[str, str]) -> dict[str, Any]:
        wanted = [i for i in params.get("ids", "").split("|") if i]
        if not wanted:
            return _error("param-missing", 'Either provide the item "ids" or pairs of "sites" and "titles".')
        if len(wanted) > MAX_IDS:
            return _error("toomanyvalues", f'Too many values supplied for parameter "ids". The limit is {MAX_IDS}.')
        props = set(params.get("props", "info|sitelinks|aliases|labels|descriptions|claims|datatype").split("|"))
        # An entity of the build without English names (only linked to) still has its statements.
        claims = self.claims.of([id for id in wanted if ids.is_wikidata_id(id)]) \
            if self.claims is not None and "claims" in props else {}
        entities: dict[str, Any] = {}
        for id in wanted:
            entity = self.names.by_id.get(id)
            if entity is None and claims.get(id):
                entity = Entry(id, "property" if id.startswith("P") else "item", "", (), "", "", 0)
            entities[id] = _entity(entity, props) if entity else {"id": id, "missing": ""}
            if entity and id in claims:
                entities[id]["claims"] = claims[id]
        return {"entities": entities, "success": 1}

    # -- HTTP -------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                self._serve(urlsplit(self.path).query)

            def do_POST(self) -> None:
                self._serve(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode("utf-8", "replace"))

            def _serve(self, query: str) -> None:
                if urlsplit(self.path).path != "/w/api.php":
                    self._send(404, {"error": {"code": "notfound", "info": self.path}}, {})
                    return
                params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
                agent = self.headers.get("User-Agent", "")
                who = agent + "@" + self.client_address[0]
                with api._lock:
                    api.user_agents.add(agent)
                refused = api._admit(who, params)
                if refused is not None:
                    self._send(refused[0], refused[2], refused[1])
                    return
                try:
                    answer = api.answer(params)
                finally:
                    # before the answer leaves: the client may send its next request at once
                    api._done(who, params.get("action", ""))
                self._send(200, answer, {"MediaWiki-API-Error": answer["error"]["code"]} if "error" in answer else {})

            def _send(self, status: int, data: dict[str, Any], headers: dict[str, str]) -> None:
                time.sleep(api.latency_s)
                reply(self, status, json.dumps(data).encode(),
                      {"Content-Type": "application/json; charset=utf-8", **headers})

        return Handler


def _hit(m: Match) -> dict[str, Any]:
    """One ``wbsearchentities`` hit in the API's shape."""
    e = m.entity
    title = f"Property:{e.id}" if e.kind == "property" else e.id
    display: dict[str, Any] = {"label": {"value": e.label, "language": "en"}}
    hit: dict[str, Any] = {"id": e.id, "title": title, "pageid": int(e.id[1:]) if e.id[1:].isdigit() else 0,
                           "concepturi": ids.to_iri(e.id), "repository": "wikidata",
                           "url": f"//www.wikidata.org/wiki/{title}"}
    if e.kind == "property":
        hit["datatype"] = e.datatype
    if e.description:
        display["description"] = {"value": e.description, "language": "en"}
    hit["display"] = display
    hit["label"] = e.label
    if e.description:
        hit["description"] = e.description
    hit["match"] = {"type": m.type, "language": "en", "text": m.text}
    if m.type == "alias":
        hit["aliases"] = [m.text]
    return hit


def _entity(e: Entry, props: set[str]) -> dict[str, Any]:
    """One ``wbgetentities`` entity (English terms) in the API's shape."""
    out: dict[str, Any] = {"type": e.kind, "id": e.id}
    if e.kind == "property" and "datatype" in props:
        out["datatype"] = e.datatype
    if "labels" in props:
        out["labels"] = {"en": {"language": "en", "value": e.label}} if e.label else {}
    if "descriptions" in props:
        out["descriptions"] = {"en": {"language": "en", "value": e.description}} if e.description else {}
    if "aliases" in props:
        out["aliases"] = {"en": [{"language": "en", "value": a} for a in e.aliases]} if e.aliases else {}
    return out


def _error(code: str, info: str) -> dict[str, Any]:
    return {"error": {"code": code, "info": info, "*": "See https://www.wikidata.org/w/api.php for API usage."},
            "servedby": "mw-api-ext.stand-in"}


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None
