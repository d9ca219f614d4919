"""The DBpedia-encoded base on a real Virtuoso: :class:`VirtuosoServer` runs ``virtuoso-t`` on a fresh database,
bulk-loads a build's N-Triples and serves ``/sparql``; :class:`VirtuosoStore` (KIF store ``kifqa-virtuoso``)
queries it with KIF's DBpedia mapping.

Virtuoso quirks handled here (Debian ``virtuoso-opensource-7`` 7.2.5):

- a POST with ``Content-Type: application/sparql-query`` (how KIF's ``sparql-httpx`` sends every query)
  never gets an answer: :class:`VirtuosoStore` POSTs ``application/x-www-form-urlencoded`` instead, with the
  query properly URL-encoded (KIF's own form mode sends it unencoded);
- ASK queries are answered in JSON as a SELECT of a variable ``__ASK_RETVAL`` (one row ``1`` when true, no
  row when false) instead of ``{"boolean": ...}``, which KIF's ``ask``/``count`` parsing rejects:
  :class:`VirtuosoStore` turns them back into SPARQL's boolean result;
- ``[SPARQL] ResultSetMaxRows`` (10,000 by default) silently truncates results (only an
  ``X-SPARQL-MaxRows`` header tells): set to :data:`MAX_ROWS`, above ``kb.max_results + 1``;
- ``MaxQueryExecutionTime`` makes "anytime" queries that return partial results on timeout with HTTP 200:
  disabled (``0``), so a result is complete or the client's ``kb.timeout_s`` fails it.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import secrets
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlencode

import httpx
from kif_lib.compiler.sparql.results import SPARQL_Results, SPARQL_ResultsAsk
from kif_lib.store.sparql.httpx import HttpxSPARQL_Store

from kifqa.errors import KBError
from kifqa.kb.server import free_port, port_is_free, stop_process, wait_until

_logger = logging.getLogger(__name__)

#: Default HTTP port of ``kifqa kb serve --engine virtuoso`` and of the ``local-dbpedia-server`` spec.
DEFAULT_PORT = 8890
#: Virtuoso's ``ResultSetMaxRows``: more than any ``kb.max_results`` in use.
MAX_ROWS = 1_000_000

_INI = """\
[Database]
DatabaseFile = {run}/virtuoso.db
ErrorLogFile = {run}/virtuoso.log
LockFile = {run}/virtuoso.lck
TransactionFile = {run}/virtuoso.trx
xa_persistent_file = {run}/virtuoso.pxa
ErrorLogLevel = 7
FileExtend = 200
Striping = 0
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = {run}/virtuoso-temp.db
TransactionFile = {run}/virtuoso-temp.trx
Striping = 0

[Parameters]
ServerPort = 127.0.0.1:{sql_port}
DisableUnixSocket = 1
CheckpointInterval = 0
NumberOfBuffers = 40000
MaxDirtyBuffers = 30000
DirsAllowed = ., {data}
ThreadsPerQuery = 2

[HTTPServer]
ServerPort = {host}:{port}
ServerRoot = {run}
ServerThreads = 10
MaxClientConnections = 10

[SPARQL]
ResultSetMaxRows = {max_rows}
MaxQueryExecutionTime = 0
MaxQueryCostEstimationTime = 0
"""


def virtuoso_binaries() -> tuple[str, str]:
    """The ``virtuoso-t`` server and ``isql-vt`` client executables; :class:`KBError` if missing."""
    server, client = shutil.which("virtuoso-t"), shutil.which("isql-vt") or shutil.which("isql")
    if server is None or client is None:
        raise KBError("Virtuoso is not installed (`apt-get install virtuoso-opensource-7` gives virtuoso-t and "
                      "isql-vt)")
    return server, client


class VirtuosoServer:
    """A ``virtuoso-t`` on a fresh database in a temporary folder, serving ``rdf_path`` (N-Triples, loaded into
    ``graph``) at ``http://host:port/sparql`` (a free port by default).

    Use as a context manager, or call :meth:`start` and :meth:`stop`. :attr:`startup_s`, :attr:`load_s` and
    :attr:`triples` say how long the server took to come up and to load, and how many triples it holds. The start
    and the load may each take ``startup_timeout_s`` of the server's CPU time
    (:func:`~kifqa.kb.server.wait_until`): on a machine busy with model runs they take longer in wall time.
    """

    def __init__(self, rdf_path: Path, *, graph: str, port: int | None = None, host: str = "127.0.0.1",
                 startup_timeout_s: float = 120.0) -> None:
        self.rdf_path = rdf_path.resolve()
        self.graph = graph
        self.host = host
        self.port = port or free_port(host)
        self.startup_timeout_s = startup_timeout_s
        self.startup_s = self.load_s = 0.0
        self.triples = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._run: Path | None = None

    @property
    def url(self) -> str:
        """The SPARQL endpoint."""
        return f"http://{self.host}:{self.port}/sparql"

    def start(self) -> VirtuosoServer:
        """Starts the server, loads the data and waits until it answers; :class:`KBError` if it does not."""
        if not self.rdf_path.is_file():
            raise KBError(f"no N-Triples file at {self.rdf_path}; run `kifqa kb build --encoding dbpedia`")
        if not port_is_free(self.host, self.port):
            raise KBError(f"port {self.port} on {self.host} is already in use; pick another with --port")
        server, client = virtuoso_binaries()
        _sweep()
        self._run = Path(tempfile.mkdtemp(prefix=_RUN_PREFIX))
        (self._run / "owner.pid").write_text(str(os.getpid()))
        sql_port = free_port()
        (self._run / "virtuoso.ini").write_text(_INI.format(
            run=self._run, data=self.rdf_path.parent, sql_port=sql_port, host=self.host, port=self.port,
            max_rows=MAX_ROWS))
        started = time.perf_counter()
        try:
            first = self._create(server)
            self._process = subprocess.Popen(
                [server, "+foreground", "+configfile", "virtuoso.ini"], cwd=self._run, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None)
            self._wait_until_up()
            self.startup_s = time.perf_counter() - started
            self._load(client, sql_port, first)
            self.load_s = time.perf_counter() - started - self.startup_s
        except BaseException:
            self.stop()
            raise
        _logger.info("Virtuoso at %s: up in %.1f s, loaded %d triples of %s in %.1f s", self.url, self.startup_s,
                     self.triples, self.rdf_path, self.load_s)
        return self

    def stop(self) -> None:
        """Stops the server (politely, then by force) and deletes its database."""
        if self._process is not None:
            stop_process(self._process, timeout_s=15)
            self._process = None
        if self._run is not None:
            shutil.rmtree(self._run, ignore_errors=True)
            self._run = None

    def wait(self) -> int:
        """Waits until the server exits; returns its status."""
        assert self._process is not None, "server not started"
        return self._process.wait()

    def _wait_until_up(self) -> None:
        assert self._process is not None
        wait_until(self._answers, self._process, timeout_s=self.startup_timeout_s,
                   failed=lambda why: KBError(f"Virtuoso did not answer on {self.url}: {why}: {self._log()}"))

    def _answers(self) -> bool:
        try:
            return self._post("ASK {}").status_code == 200
        except httpx.TransportError:
            return False

    def _create(self, server: str) -> str:
        """Creates the database with its ``dba`` and ``dav`` passwords set to a fresh random one, which it
        returns, before the server ever listens (``+pwdold dba +pwddba``: Virtuoso creates the database,
        sets them, checkpoints and exits without opening a port), so the factory ``dba``/``dba`` never works
        on a port. That password is in this one process's arguments for its few seconds; :meth:`_load`
        replaces it by one that no command line carries."""
        # Virtuoso keeps 16 characters of a password given this way; letters and digits, so none reads as an option
        password = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(16))
        try:
            done = subprocess.run(
                [server, "+foreground", "+configfile", "virtuoso.ini", "+pwdold", "dba", "+pwddba", password,
                 "+pwddav", password], cwd=self._run, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, timeout=self.startup_timeout_s, check=False)
        except subprocess.TimeoutExpired as e:
            raise KBError(f"Virtuoso did not create its database in {self.startup_timeout_s:g} s: {self._log()}") \
                from e
        if b"The DBA password is changed." not in done.stdout:
            raise KBError(f"Virtuoso did not set its dba password while creating its database: {self._log()}")
        return password

    def _load(self, client: str, sql_port: int, password: str) -> None:
        """Locks the SQL port, then bulk-loads the N-Triples file (``ld_dir`` + ``rdf_loader_run``) with a free-text
        index on every literal, as DBpedia's Virtuoso has (``bif:contains``), checks that the loader reported no
        error, and counts the graph's triples.

        It logs in with ``password`` (:meth:`_create`'s) and its first statement sets another random one, kept
        nowhere (only the HTTP endpoint is used afterwards), so no other local user can log in to the SQL
        port. The password and the statements reach ``isql`` on its standard input, never on a command line
        that ``ps`` would show."""
        assert self._process is not None
        folder, name, graph = (_sql_text(str(x)) for x in (self.rdf_path.parent, self.rdf_path.name, self.graph))
        sql = (f"USER_SET_PASSWORD('dba', {_sql_text(secrets.token_urlsafe(24))});\n"
               f"USER_SET_PASSWORD('dav', {_sql_text(secrets.token_urlsafe(24))});\n"
               "DB.DBA.RDF_OBJ_FT_RULE_ADD(null, null, 'index_local');\n"
               f"ld_dir({folder}, {name}, {graph});\nrdf_loader_run();\nDB.DBA.VT_INC_INDEX_DB_DBA_RDF_OBJ();\n"
               "SELECT ll_error FROM DB.DBA.LOAD_LIST WHERE ll_error IS NOT NULL;\n")
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as statements:
            statements.write(f"{password}\n{sql}".encode())  # isql reads a password it was not given first
            statements.seek(0)
            loader = subprocess.Popen([client, f"127.0.0.1:{sql_port}", "dba"], stdin=statements,
                                      stdout=out, stderr=subprocess.STDOUT)
            try:
                wait_until(lambda: loader.poll() is not None, self._process, timeout_s=self.startup_timeout_s,
                           failed=lambda why: KBError(f"Virtuoso did not load {self.rdf_path}: {why}: {self._log()}"))
            finally:
                if loader.poll() is None:
                    stop_process(loader, timeout_s=5)
            out.seek(0)
            output = out.read().decode(errors="replace")
        if loader.returncode != 0 or "0 Rows." not in output:
            raise KBError(f"Virtuoso could not load {self.rdf_path}: {output[-2000:]}")
        answer = self._post(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{self.graph}> {{ ?s ?p ?o }} }}", select=True)
        self.triples = int(answer.json()["results"]["bindings"][0]["n"]["value"])

    def _post(self, query: str, *, select: bool = False) -> httpx.Response:
        return httpx.post(self.url, data={"query": query}, timeout=self.startup_timeout_s if select else 2.0,
                          headers={"Accept": "application/sparql-results+json"})

    def _log(self) -> str:
        log = self._run / "virtuoso.log" if self._run else None
        text = log.read_text(errors="replace") if log and log.is_file() else ""
        return text.strip()[-2000:] or "(no log)"

    def __enter__(self) -> VirtuosoServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_RUN_PREFIX = "kifqa-virtuoso-"


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sweep() -> None:
    """Deletes the databases of servers whose owner process died without stopping them (e.g. killed)."""
    for run in Path(tempfile.gettempdir()).glob(_RUN_PREFIX + "*"):
        try:
            os.kill(int((run / "owner.pid").read_text()), 0)
        except ProcessLookupError:
            shutil.rmtree(run, ignore_errors=True)
        except (OSError, ValueError):
            pass  # not ours to judge: no or unreadable owner file, or another user's process


_servers: dict[Path, VirtuosoServer] = {}
_servers_lock = threading.Lock()


def process_server(rdf_path: Path, *, graph: str) -> VirtuosoServer:
    """A server over ``rdf_path`` private to this process: started on first use, stopped at exit."""
    with _servers_lock:
        server = _servers.get(rdf_path)
        if server is None:
            server = _servers[rdf_path] = VirtuosoServer(rdf_path, graph=graph).start()
            atexit.register(server.stop)
        return server


#: ``prctl``, looked up before any fork (the child must not load anything between fork and exec).
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent() -> None:
    """In the child: have Linux send SIGTERM when the parent dies, so no orphan server is left. Linux signals
    the death of the *thread* that forked, so only servers started on the main thread ask for it."""
    if _prctl is not None:
        _prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class VirtuosoStore(HttpxSPARQL_Store, store_name="kifqa-virtuoso",
                    store_description="Virtuoso SPARQL endpoint of the DBpedia-encoded base (DBpedia mapping)"):
    """KIF's httpx SPARQL store, sending queries as URL-encoded forms (Virtuoso 7.2 never answers a direct
    ``application/sparql-query`` POST), with KIF's DBpedia mapping without its Wikidata-property matching
    (the base has no Wikidata properties: it would only repeat each property).

    Args:
        store_name: Name of the store plugin to instantiate.
        iri: The SPARQL endpoint.
        kwargs: Other options of KIF's ``sparql-httpx`` store (``headers``, ``mapping``, ``timeout``...).
    """

    class HttpxBackend(HttpxSPARQL_Store.HttpxBackend):
        _default_headers = {**HttpxSPARQL_Store.HttpxBackend._default_headers,  # type: ignore[misc]  # overrides KIF's Final
                            "Content-Type": "application/x-www-form-urlencoded"}

        def _http_post_encode_content(self, content: str) -> bytes:
            return urlencode({"query": content}).encode()

        def _ask(self, query: str) -> SPARQL_ResultsAsk:
            return _boolean(self._select(query))

        async def _aask(self, query: str) -> SPARQL_ResultsAsk:
            return _boolean(await self._aselect(query))

    def __init__(self, store_name: str, iri: str, **kwargs: Any) -> None:
        # Imported here: KIF's DBpedia mapping takes seconds to import, which every command paid
        # (importing kifqa.kb registers this store) even when it never opens a DBpedia base.
        from kif_lib.compiler.sparql.mapping.dbpedia import DBpediaMapping

        kwargs.setdefault("mapping", DBpediaMapping(wikidata_properties=False))
        super().__init__(store_name, iri, **kwargs)


def _boolean(results: SPARQL_Results | SPARQL_ResultsAsk) -> SPARQL_ResultsAsk:
    """SPARQL's ASK result of Virtuoso's answer (a SELECT of ``__ASK_RETVAL``)."""
    if "boolean" in results:
        return cast(SPARQL_ResultsAsk, results)
    rows = cast(SPARQL_Results, results)["results"]["bindings"]
    return {"boolean": any((term := row.get("__ASK_RETVAL")) is not None and term.get("value") == "1" for row in rows)}
