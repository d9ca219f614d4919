"""KB specs: one string naming a knowledge base, resolved to a KIF (Store, Search) pair or a :class:`KnowledgeBase`."""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from kif_lib import Search, Store

from kifqa.config import PUBLIC_SERVICES, Mirror, Settings
from kifqa.errors import ConfigError, KBError
from kifqa.kb import dbpedia, services
from kifqa.kb.build import BuiltKB, locate
from kifqa.kb.index import LabelIndex
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.limit import LocalGate
from kifqa.kb.public import PublicKnowledgeBase
from kifqa.kb.search import LocalSearch
from kifqa.kb.sparql import sparql_store
from kifqa.kb.split import ScholarlySplit
from kifqa.kb.store import OxigraphStore
from kifqa.kb.virtuoso import DEFAULT_PORT, process_server

FORMS = """\
  local                  the built base, in process (pyoxigraph) + local label search (default)
  local-server[:PORT]    the `kifqa kb serve` server on 127.0.0.1:PORT (default kb.server_port) + local search
  local-hard             the hard base (`kifqa kb build --hard`: real statements plus synthetic distractors),
                         in process + its label search
  local-hard-server[:PORT]
                         the `kifqa kb serve --hard` server on 127.0.0.1:PORT (default kb.server_port) + the
                         hard base's label search
  local-dbpedia          the DBpedia-encoded build on a Virtuoso this process starts (and stops at exit)
                         + its DBpedia-Lookup-style search (`kifqa-dbpedia`)
  local-dbpedia-server[:PORT]
                         the `kifqa kb serve --engine virtuoso` server on 127.0.0.1:PORT (default 8890)
                         + `kifqa-dbpedia` search
  wikidata               Wikidata Query Service (KIF `wdqs`) + Wikidata API search (`wikidata-wapi`), or the
                         mirrors kb.endpoints names for query.wikidata.org and www.wikidata.org
  dbpedia                DBpedia's SPARQL endpoint (`kifqa-virtuoso`: KIF's DBpedia mapping, form posts) +
                         DBpedia Lookup (`dbpedia-lookup`), or the mirrors kb.endpoints names for dbpedia.org
                         and lookup.dbpedia.org
  sparql+wikidata:URL    a Wikidata-shaped SPARQL endpoint (`wikidata-sparql`); local search when URL is on
                         this machine (it serves the built base), `wikidata-wapi` otherwise
  sparql+dbpedia:URL     a DBpedia-shaped SPARQL endpoint (`kifqa-virtuoso`: KIF's DBpedia mapping, form posts);
                         `kifqa-dbpedia` search when URL is on this machine, DBpedia Lookup otherwise
  kif:STORE[?K=V&...]    any KIF store plugin; `iri` is its endpoint, `search` a KIF search plugin
                         (default `empty`; `kifqa-local`/`kifqa-dbpedia` search the builds), `search_iri` that
                         plugin's endpoint; other keys go to the store"""

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
#: Public endpoints whose operators ask every client for a contact (Wikimedia's User-Agent policy).
PUBLIC_HOSTS = frozenset(PUBLIC_SERVICES)
#: Contacts that name nobody: empty, or the reserved example domains (RFC 2606).
_PLACEHOLDER = re.compile(r"^\s*$|example\.(org|com|net)\b", re.IGNORECASE)


def user_agent(settings: Settings) -> str:
    """The User-Agent of remote calls: ``kifqa/<version> (<contact>)``, or ``kifqa/<version>`` without one."""
    agent = f"kifqa/{importlib.metadata.version('kifqa')}"
    return agent if _PLACEHOLDER.search(settings.kb.contact) else f"{agent} ({settings.kb.contact})"


@dataclass(frozen=True, kw_only=True)
class ResolvedKB:
    """What a KB spec names, resolved once: the KIF store and search, the label index of a local build
    (labels and datatypes come from it), and where the queries go."""

    store: Store
    search: Search
    index: LabelIndex | None
    #: The full-text search asked where ``search`` finds nothing the text names (``wikidata``: the API's
    #: CirrusSearch, ``list=search``).
    fulltext: Search | None
    #: :func:`endpoint_info` of the pair.
    info: dict[str, Any]

    @property
    def host(self) -> str | None:
        """The host that keys the store's ``batch.limits``: the public service's (``query.wikidata.org``,
        ``dbpedia.org``) for ``wikidata`` and ``dbpedia``, mirrored or not, else its endpoint's; ``None`` in
        process."""
        return self.info.get("service") or urlsplit(str(self.info.get("endpoint", ""))).hostname

    @property
    def search_host(self) -> str | None:
        """The host that keys the search's ``batch.limits`` (the public service's, mirrored or not);
        ``None`` for a search on this machine's label index."""
        return self.info.get("search_service") or urlsplit(str(self.info.get("search_endpoint", ""))).hostname


def resolve(spec: str, settings: Settings) -> ResolvedKB:
    """What a spec names (see :data:`FORMS`); :class:`ConfigError` if it names nothing, or if it reaches a
    public endpoint (:data:`PUBLIC_HOSTS`) without a real ``kb.contact``."""
    resolved = _resolved(spec.strip(), settings)
    if unnamed := _unnamed(resolved, settings):
        raise ConfigError(_no_contact(spec, unnamed))
    return resolved


@dataclass(frozen=True, kw_only=True)
class KBRoutes:
    """Where the queries of a KB spec go, found once without opening the knowledge base (nothing is sent): what
    a job's checks, its endpoint limits and the KB's placement need. Hosts and URL are ``None`` for the
    in-process and local builds, which are not opened for it."""

    spec: str
    #: The host that keys the store's ``batch.limits`` (:attr:`ResolvedKB.host`).
    host: str | None = None
    #: The host that keys the search's ``batch.limits`` (:attr:`ResolvedKB.search_host`).
    search_host: str | None = None
    #: The host that keys the scholarly graph's ``batch.limits`` (:data:`SCHOLARLY`), where ``wikidata`` asks
    #: it (:func:`scholarly_mirror`).
    scholarly_host: str | None = None
    #: The http(s) URL the store sends its queries to; ``None`` for stores without one.
    url: str | None = None
    #: The User-Agent of its remote calls (:func:`user_agent`).
    user_agent: str
    #: Why opening it would fail for want of a real ``kb.contact`` (:func:`resolve`); ``None``: it would not.
    no_contact: str | None = None


def kb_routes(settings: Settings) -> KBRoutes:
    """The :class:`KBRoutes` of ``kb.spec``; :class:`ConfigError` if it names nothing (no contact is needed)."""
    spec, agent = settings.kb.spec.strip(), user_agent(settings)
    if spec in _LOCAL:
        return KBRoutes(spec=spec, user_agent=agent)
    resolved = _resolved(spec, settings)
    url = str(resolved.info.get("endpoint", ""))
    unnamed = _unnamed(resolved, settings)
    scholarly = SCHOLARLY if spec == "wikidata" and scholarly_mirror(settings) is not None else None
    return KBRoutes(spec=spec, host=resolved.host, search_host=resolved.search_host, scholarly_host=scholarly,
                    url=url if urlsplit(url).scheme in ("http", "https") else None, user_agent=agent,
                    no_contact=_no_contact(spec, unnamed) if unnamed else None)


def routes(spec: str, settings: Settings) -> list[tuple[str, str]]:
    """Where each kind of query of a spec goes, (what, URL), as ``kifqa check`` prints it; none for the in-process
    and local builds. Nothing is sent."""
    spec = spec.strip()
    if spec in _LOCAL:
        return []
    resolved = _resolved(spec, settings)
    found = [("SPARQL: statements, properties, labels, exact names", str(resolved.info.get("endpoint", ""))),
             ("search: entities and properties by name", str(resolved.info.get("search_endpoint", "")))]
    if resolved.fulltext is not None:
        found.append(("full-text search (where the search names nothing)",
                      str(endpoint_info(resolved.store, resolved.fulltext).get("search_endpoint", ""))))
    if spec == "wikidata" and (scholarly := scholarly_mirror(settings)) is not None:
        found.append(("SPARQL: statements of entities the main graph has none on, and statements pointing at any "
                      "entity (scholarly articles)", scholarly.url))
    return [(what, url) for what, url in found if url]


#: The specs of the in-process and local builds, which this process opens or starts.
_LOCAL = ("local", "local-hard", "local-dbpedia")


def _unnamed(resolved: ResolvedKB, settings: Settings) -> list[str]:
    """The public hosts (:data:`PUBLIC_HOSTS`) the pair's URLs reach while ``kb.contact`` names nobody."""
    if not _PLACEHOLDER.search(settings.kb.contact):
        return []
    return sorted({host for key in ("endpoint", "search_endpoint")
                   if (host := urlsplit(str(resolved.info.get(key, ""))).hostname) in PUBLIC_HOSTS})


def _no_contact(spec: str, public: list[str]) -> str:
    return (f"KB spec {spec.strip()!r} queries {' and '.join(public)}, whose operators ask for a contact: set "
            "kb.contact (environment KIFQA_KB__CONTACT) to your URL or e-mail address")


def _resolved(spec: str, settings: Settings) -> ResolvedKB:
    store, search = _resolve(spec, settings)
    info = endpoint_info(store, search)
    if spec in _SERVICES:
        info["service"], info["search_service"] = _SERVICES[spec]
    return ResolvedKB(store=store, search=search, index=search.index if isinstance(search, LocalSearch) else None,
                      fulltext=_wikidata_fulltext(settings) if spec == "wikidata" else None, info=info)


#: WDQS's host of the scholarly-article graph (since 2025).
SCHOLARLY = "query-scholarly.wikidata.org"
#: The public services (SPARQL, search) of the specs that always run KIF's public plugins.
_SERVICES = {"wikidata": ("query.wikidata.org", "www.wikidata.org"), "dbpedia": ("dbpedia.org", "lookup.dbpedia.org")}
#: Each public service's own URL.
_PUBLIC_URLS = {"query.wikidata.org": "https://query.wikidata.org/sparql",
                "www.wikidata.org": "https://www.wikidata.org/w/api.php",
                "query-scholarly.wikidata.org": "https://query-scholarly.wikidata.org/sparql",
                "dbpedia.org": "https://dbpedia.org/sparql",
                "lookup.dbpedia.org": "https://lookup.dbpedia.org/api/search"}


def _resolve(spec: str, settings: Settings) -> tuple[Store, Search]:
    """The KIF store and search of a spec: the opener :data:`_OPENERS` has for its form."""
    head, colon, rest = spec.partition(":")
    opener = _OPENERS.get(head)
    if opener is None or (colon and head in _WHOLE) or (head == "kif" and not rest):
        raise ConfigError(f"unknown KB spec {spec!r}; valid forms:\n{FORMS}")
    return opener(rest, spec, settings)


def _local(settings: Settings, *, hard: bool) -> tuple[Store, Search]:
    built = locate(settings, hard=hard)
    return _local_store(built, settings), _local_search(built)


def _local_dbpedia(settings: Settings) -> tuple[Store, Search]:
    built = dbpedia.locate(settings)
    return _dbpedia_endpoint(process_server(built.rdf_path, graph=dbpedia.GRAPH).url, settings, built)


#: Opens the KIF store and search of a spec, by the spec's form (its head, before any ``:``): from what follows
#: the ``:`` (``rest``), the whole spec (for errors) and the settings.
_Opener = Callable[[str, str, Settings], tuple[Store, Search]]
#: The forms of :data:`FORMS`, by head.
_OPENERS: dict[str, _Opener] = {
    "local": lambda rest, spec, settings: _local(settings, hard=False),
    "local-hard": lambda rest, spec, settings: _local(settings, hard=True),
    "local-server": lambda rest, spec, settings: _wikidata_endpoint(
        _loopback(rest, spec, settings.kb.server_port, "query"), settings),
    "local-hard-server": lambda rest, spec, settings: _wikidata_endpoint(
        _loopback(rest, spec, settings.kb.server_port, "query"), settings, hard=True),
    "local-dbpedia": lambda rest, spec, settings: _local_dbpedia(settings),
    "local-dbpedia-server": lambda rest, spec, settings: _dbpedia_endpoint(
        _loopback(rest, spec, DEFAULT_PORT, "sparql"), settings),
    "wikidata": lambda rest, spec, settings: _wikidata(settings),
    "dbpedia": lambda rest, spec, settings: _dbpedia(settings),
    "sparql+wikidata": lambda rest, spec, settings: _wikidata_endpoint(_url(rest, spec), settings),
    "sparql+dbpedia": lambda rest, spec, settings: _dbpedia_endpoint(_url(rest, spec), settings),
    "kif": lambda rest, spec, settings: _kif(rest, settings),
}
#: The forms that take nothing after their name.
_WHOLE = frozenset({"local", "local-hard", "local-dbpedia", "wikidata", "dbpedia"})


def open_kb(spec: str | None, settings: Settings) -> KifKnowledgeBase | ScholarlySplit:
    """The knowledge base a spec names (``None``: ``settings.kb.spec``); for ``wikidata`` with a scholarly graph
    (:func:`scholarly_mirror`), the main graph's and the scholarly one's (:class:`ScholarlySplit`). Close it
    with ``await kb.aclose()``."""
    spec = spec or settings.kb.spec
    resolved = resolve(spec, settings)
    if spec == "wikidata" and settings.kb.wikidata_lookups == "api":
        main: KifKnowledgeBase = PublicKnowledgeBase(
            resolved.store, resolved.search, spec=spec, settings=settings.kb, fulltext=resolved.fulltext,
            api_url=_service(settings, "www.wikidata.org").url, headers=_remote(settings)["headers"])
    else:
        main = KifKnowledgeBase(resolved.store, resolved.search, spec=spec, settings=settings.kb,
                                index=resolved.index, fulltext=resolved.fulltext)
    kb = _gated(main, settings, store_host=resolved.host, search_host=resolved.search_host)
    scholarly = scholarly_mirror(settings) if spec.strip() == "wikidata" else None
    if scholarly is None:
        return kb
    articles = KifKnowledgeBase(_wikidata_store(scholarly, settings), _wikidata_search(settings), spec=spec,
                                settings=settings.kb)
    return ScholarlySplit(kb, _gated(articles, settings, store_host=SCHOLARLY, search_host=None))


def scholarly_mirror(settings: Settings) -> Mirror | None:
    """Where ``wikidata`` asks for the scholarly articles' statements: the mirror ``kb.endpoints`` names for
    :data:`SCHOLARLY`; else the public scholarly host while ``query.wikidata.org`` is the public one too; else
    ``None`` (a mirror of the main graph alone, such as a full dump's load, holds the articles itself)."""
    if mirror := settings.kb.endpoints.get(SCHOLARLY):
        return mirror
    return None if "query.wikidata.org" in settings.kb.endpoints else Mirror(url=_PUBLIC_URLS[SCHOLARLY])


def _gated(kb: KifKnowledgeBase, settings: Settings, *, store_host: str | None,
           search_host: str | None) -> KifKnowledgeBase:
    """``kb`` under the limits of ``batch.limits`` on its hosts, kept in this process (a batch job's KB actors
    share the main ones)."""
    if store_host and (limit := settings.batch.limits.get(store_host)):
        kb.request_gate = LocalGate(limit)
    if search_host and (limit := settings.batch.limits.get(search_host)):
        kb.search_gate = LocalGate(limit)
    return kb


def endpoint_info(store: Store, search: Search) -> dict[str, Any]:
    """Where a (store, search) pair sends its queries: plugin names, endpoint, mapping, User-Agent."""
    info: dict[str, Any] = {"store": store.store_name, "search": search.search_name}
    core = sparql_store(store)
    if core is not None:
        mapping = core.mapping
        info["mapping"] = type(mapping).__name__
        if hasattr(mapping, "options") and hasattr(mapping.options, "blazegraph"):
            info["blazegraph"] = mapping.options.blazegraph
        backend = core.backend
        # KIF keeps an httpx backend's endpoint and headers private.
        if hasattr(backend, "_iri") and hasattr(backend, "_headers"):
            info["endpoint"] = backend._iri.content
            info["user_agent"] = backend._headers.get("User-Agent", "")
        if isinstance(core, OxigraphStore):
            info["endpoint"] = "in process (pyoxigraph)"
    if isinstance(search, LocalSearch):
        info["search_index"] = str(search.index.path)
    elif hasattr(search, "_headers") and hasattr(search, "get_iri"):
        info["search_endpoint"] = search.get_iri().content if search.get_iri() else ""
        info["search_user_agent"] = search._headers.get("User-Agent", "")
    return info


def _service(settings: Settings, host: str) -> Mirror:
    """Where ``host``'s requests go: the mirror ``kb.endpoints`` names, else the public service itself."""
    return settings.kb.endpoints.get(host) or Mirror(url=_PUBLIC_URLS[host])


def _wikidata(settings: Settings) -> tuple[Store, Search]:
    """KIF's ``wdqs`` store (Blazegraph's dialect: named subqueries, ``wikibase:`` functions), or, for a mirror
    that speaks standard SPARQL, ``wikidata-sparql`` without them; KIF's ``wikidata-wapi`` search, one page
    request at a time, with ``maxlag`` and its answers checked (:mod:`kifqa.kb.services`)."""
    return _wikidata_store(_service(settings, "query.wikidata.org"), settings), _wikidata_search(settings)


def _wikidata_store(sparql: Mirror, settings: Settings) -> Store:
    if sparql.dialect == "standard":
        return Store("wikidata-sparql", sparql.url, blazegraph=False, strict=False, **_remote(settings))
    return Store("wdqs", sparql.url, **_remote(settings))


def _wikidata_search(settings: Settings) -> Search:
    search = Search("wikidata-wapi", iri=_service(settings, "www.wikidata.org").url, lookahead=1,
                    **_remote(settings))
    services.check_wikidata_api(search, maxlag_s=settings.kb.maxlag_s)
    return search


def _wikidata_fulltext(settings: Settings) -> Search:
    """KIF's ``wikidata-wapi-query`` search (the API's full text) at the Wikidata API or its mirror, checked as
    ``wikidata-wapi`` is."""
    search = Search("wikidata-wapi-query", iri=_service(settings, "www.wikidata.org").url, lookahead=1,
                    **_remote(settings))
    services.check_wikidata_api(search, maxlag_s=settings.kb.maxlag_s)
    return search


def _dbpedia(settings: Settings) -> tuple[Store, Search]:
    """KIF's DBpedia mapping posting forms (``kifqa-virtuoso``: public DBpedia is a Virtuoso, and every SPARQL
    1.1 endpoint takes them) and KIF's ``dbpedia-lookup`` search with its answers checked."""
    sparql, lookup = _service(settings, "dbpedia.org"), _service(settings, "lookup.dbpedia.org")
    search = Search("dbpedia-lookup", iri=lookup.url, **_remote(settings))
    services.check_dbpedia_lookup(search)
    return Store("kifqa-virtuoso", sparql.url, **_remote(settings)), search


def _remote(settings: Settings) -> dict[str, Any]:
    return {"headers": {"User-Agent": user_agent(settings)}, "timeout": settings.kb.timeout_s}


def _local_store(built: BuiltKB, settings: Settings) -> Store:
    try:
        return Store("kifqa-oxigraph", built.store_dir, timeout=settings.kb.timeout_s)
    except Store.Error as err:
        raise KBError(f"the knowledge base at {built.root} is unreadable ({err}); "
                      "rebuild it with `kifqa kb build --force`") from err


def _local_search(built: BuiltKB) -> Search:
    return Search("kifqa-local", LabelIndex(built.index_path))


def _dbpedia_search(built: dbpedia.DBpediaBuild) -> Search:
    return Search("kifqa-dbpedia", LabelIndex(built.index_path))


def _dbpedia_endpoint(url: str, settings: Settings, built: dbpedia.DBpediaBuild | None = None) -> tuple[Store, Search]:
    """KIF's DBpedia mapping over a SPARQL endpoint, queries posted as forms (``kifqa-virtuoso``: every SPARQL
    1.1 endpoint takes them; Virtuoso 7.2 does not answer KIF's direct ``application/sparql-query`` posts)."""
    return _endpoint("kifqa-virtuoso", url, settings, "dbpedia-lookup",
                     lambda: _dbpedia_search(built or dbpedia.locate(settings)))


def _wikidata_endpoint(url: str, settings: Settings, *, hard: bool = False) -> tuple[Store, Search]:
    return _endpoint("wikidata-sparql", url, settings, "wikidata-wapi",
                     lambda: _local_search(locate(settings, hard=hard)))


def _endpoint(store: str, url: str, settings: Settings, remote_search: str,
              local_search: Callable[[], Search]) -> tuple[Store, Search]:
    """The KIF store ``store`` at ``url``, with ``local_search`` when ``url`` is on this machine (it serves a
    local build, whose label index is at hand) and the KIF search ``remote_search`` otherwise."""
    found = Store(store, url, **_remote(settings))
    if urlsplit(url).hostname in _LOOPBACK:
        return found, local_search()
    return found, Search(remote_search, **_remote(settings))


def _kif(rest: str, settings: Settings) -> tuple[Store, Search]:
    name, _, query = rest.partition("?")
    params = {k: _scalar(v) for k, v in parse_qsl(query, keep_blank_values=True)}
    iri, search_iri = params.pop("iri", None), params.pop("search_iri", None)
    search_name = params.pop("search", "empty")
    store = _plugin(Store, name, lambda: _kif_store(name, iri, params, settings))
    if search_name == "kifqa-local":
        return store, _local_search(locate(settings))
    if search_name == "kifqa-dbpedia":
        return store, _dbpedia_search(dbpedia.locate(settings))
    extra = {"iri": search_iri} if search_iri else {}
    http = {} if search_name == "empty" else _remote(settings)
    return store, _plugin(Search, str(search_name), lambda: Search(str(search_name), **http, **extra))


def _kif_store(name: str, iri: Any, params: dict[str, Any], settings: Settings) -> Store:
    if name == "kifqa-oxigraph":
        return Store(name, iri or locate(settings).store_dir, timeout=settings.kb.timeout_s, **params)
    args = (str(iri),) if iri else ()
    return Store(name, *args, **_remote(settings), **params)


def _plugin(kind: type[Store] | type[Search], name: str, make: Callable[[], Any]) -> Any:
    if name not in kind.registry:
        raise ConfigError(f"no KIF {kind.__name__.lower()} plugin {name!r}; known: {', '.join(sorted(kind.registry))}")
    try:
        return make()
    except (KBError, ConfigError):
        raise
    except Exception as err:
        raise ConfigError(f"cannot create KIF {kind.__name__.lower()} {name!r}: {err}") from err


def _scalar(value: str) -> Any:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for number in (int, float):
        try:
            return number(value)
        except ValueError:
            pass
    return value


def _url(rest: str, spec: str) -> str:
    if urlsplit(rest).scheme not in ("http", "https") or not urlsplit(rest).hostname:
        raise ConfigError(f"KB spec {spec!r} needs an http(s) URL after the prefix; valid forms:\n{FORMS}")
    return rest


def _loopback(rest: str, spec: str, default_port: int, path: str) -> str:
    """The URL of a server on this machine at the port after the spec's ``:`` (else ``default_port``)."""
    return f"http://127.0.0.1:{_port(rest, spec) if rest else default_port}/{path}"


def _port(text: str, spec: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(f"KB spec {spec!r}: {text!r} is not a port number")
    return int(text)
