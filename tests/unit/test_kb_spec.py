"""KB specs: remote ones are built with the right endpoint, mapping and User-Agent (no network is used)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kif_lib import Search, Store

from kifqa.config import KBSettings, Settings
from kifqa.errors import ConfigError, KBError
from kifqa.kb.limit import LocalGate
from kifqa.kb.spec import endpoint_info, open_kb, resolve, routes, user_agent
from kifqa.kb.split import ScholarlySplit

CONTACT = "https://github.com/kifqa-tester (kifqa-tester@users.noreply.github.com)"


@pytest.fixture
def remote_settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "no-data", cache_dir=tmp_path / "cache",
                    kb=KBSettings(contact=CONTACT, timeout_s=7.5))


def _info(spec: str, settings: Settings) -> dict[str, object]:
    return resolve(spec, settings).info


def test_user_agent_names_kifqa_and_the_contact(remote_settings: Settings) -> None:
    assert user_agent(remote_settings).startswith("kifqa/")
    assert user_agent(remote_settings).endswith(f"({CONTACT})")


@pytest.mark.parametrize("spec", ["wikidata", "dbpedia", "sparql+wikidata:https://qlever.example.org/api/wikidata",
                                  "kif:wdqs?search=empty"])
@pytest.mark.parametrize("contact", ["", "  ", "https://example.org/your-project (you@example.org)"])
def test_a_public_endpoint_needs_a_real_contact(spec: str, contact: str, remote_settings: Settings) -> None:
    settings = remote_settings.model_copy(update={"kb": remote_settings.kb.model_copy(update={"contact": contact})})
    with pytest.raises(ConfigError, match=r"(?s)queries .*wikidata\.org|dbpedia\.org.*set kb\.contact "
                                          r"\(environment KIFQA_KB__CONTACT\)"):
        resolve(spec, settings)


def test_a_private_endpoint_needs_no_contact(remote_settings: Settings) -> None:
    settings = remote_settings.model_copy(update={"kb": remote_settings.kb.model_copy(update={"contact": ""})})
    info = _info("kif:wikidata-sparql?iri=https://kb.internal.example/sparql", settings)
    assert info["endpoint"] == "https://kb.internal.example/sparql"
    assert info["user_agent"] == user_agent(settings) and "(" not in user_agent(settings)


def test_wikidata(remote_settings: Settings) -> None:
    resolved = resolve("wikidata", remote_settings)
    store, search = resolved.store, resolved.search
    assert _info("wikidata", remote_settings) == {
        "store": "wdqs", "search": "wikidata-wapi", "mapping": "WikidataMapping", "blazegraph": True,
        "endpoint": "https://query.wikidata.org/sparql", "user_agent": user_agent(remote_settings),
        "search_endpoint": "https://www.wikidata.org/w/api.php", "search_user_agent": user_agent(remote_settings),
        "service": "query.wikidata.org", "search_service": "www.wikidata.org"}
    assert store.timeout == 7.5 and search.timeout == 7.5
    assert search.lookahead == 1  # one page request at a time, never KIF's parallel look-ahead
    assert (resolved.host, resolved.search_host) == ("query.wikidata.org", "www.wikidata.org")


def _mirrored(settings: Settings, endpoints: dict[str, object]) -> Settings:
    return settings.override(kb={"endpoints": endpoints})


def test_wikidata_on_a_mirror_runs_the_public_plugins_there(remote_settings: Settings) -> None:
    settings = _mirrored(remote_settings, {"query.wikidata.org": "http://mirror:7001/sparql",
                                           "www.wikidata.org": {"url": "http://mirror:8080/w/api.php"}})
    resolved = resolve("wikidata", settings)
    info = resolved.info
    assert (info["store"], info["blazegraph"], info["endpoint"]) == ("wdqs", True, "http://mirror:7001/sparql")
    assert (info["search"], info["search_endpoint"]) == ("wikidata-wapi", "http://mirror:8080/w/api.php")
    assert info["user_agent"] == info["search_user_agent"] == user_agent(settings)
    # Limited as the public services are: the same `batch.limits` keys.
    assert (resolved.host, resolved.search_host) == ("query.wikidata.org", "www.wikidata.org")


def test_each_kind_of_query_names_its_host(remote_settings: Settings) -> None:
    """What ``kifqa check`` prints: where each kind of query of a spec goes, mirrored or not."""
    settings = _mirrored(remote_settings, {"query.wikidata.org": {"url": "http://qlever:7001/api/wikidata",
                                                                  "dialect": "standard"}})
    assert routes("wikidata", settings) == [
        ("SPARQL: statements, properties, labels, exact names", "http://qlever:7001/api/wikidata"),
        ("search: entities and properties by name", "https://www.wikidata.org/w/api.php"),
        ("full-text search (where the search names nothing)", "https://www.wikidata.org/w/api.php")]
    assert [url for _, url in routes("dbpedia", remote_settings)] == [
        "https://dbpedia.org/sparql", "https://lookup.dbpedia.org/api/search"]
    assert routes("local", remote_settings) == []


def test_the_scholarly_graph_has_its_route(remote_settings: Settings) -> None:
    """``wikidata`` asks the scholarly articles' host (its mirror, else the public one while the main graph is the
    public one too) for entities the main graph has no statements on; a mirror of the main graph alone has none."""
    scholarly = ("SPARQL: statements of entities the main graph has none on, and statements pointing at any entity "
                 "(scholarly articles)")
    assert (scholarly, "https://query-scholarly.wikidata.org/sparql") in routes("wikidata", remote_settings)
    settings = _mirrored(remote_settings, {"query-scholarly.wikidata.org": "http://qlever:7002/api/scholarly"})
    assert (scholarly, "http://qlever:7002/api/scholarly") in routes("wikidata", settings)
    settings = _mirrored(remote_settings, {"query.wikidata.org": "http://qlever:7001/api/wikidata"})
    assert scholarly not in dict(routes("wikidata", settings))


def test_a_standard_sparql_mirror_gets_no_blazegraph_dialect(remote_settings: Settings) -> None:
    settings = _mirrored(remote_settings, {"query.wikidata.org": {"url": "http://qlever:7001/api/wikidata",
                                                                  "dialect": "standard"}})
    info = _info("wikidata", settings)
    assert (info["store"], info["blazegraph"], info["endpoint"]) == (
        "wikidata-sparql", False, "http://qlever:7001/api/wikidata")
    assert info["search_endpoint"] == "https://www.wikidata.org/w/api.php"  # the API itself is not mirrored


def test_endpoints_name_only_public_services(remote_settings: Settings) -> None:
    with pytest.raises(ConfigError, match="query.wikidat.org is none of query.wikidata.org"):
        _mirrored(remote_settings, {"query.wikidat.org": "http://mirror:7001/sparql"})
    with pytest.raises(ConfigError, match="url"):
        _mirrored(remote_settings, {"dbpedia.org": "mirror:7001/sparql"})


def test_dbpedia_on_a_mirror(remote_settings: Settings) -> None:
    settings = _mirrored(remote_settings, {"dbpedia.org": "http://127.0.0.1:8890/sparql",
                                           "lookup.dbpedia.org": "http://127.0.0.1:9274/api/search"})
    resolved = resolve("dbpedia", settings.override(kb={"contact": ""}))  # nothing public: no contact needed
    assert (resolved.info["endpoint"], resolved.info["search_endpoint"]) == (
        "http://127.0.0.1:8890/sparql", "http://127.0.0.1:9274/api/search")
    assert (resolved.host, resolved.search_host) == ("dbpedia.org", "lookup.dbpedia.org")


def test_dbpedia(remote_settings: Settings) -> None:
    info = _info("dbpedia", remote_settings)
    assert info["store"] == "kifqa-virtuoso" and info["mapping"] == "DBpediaMapping"  # queries posted as forms
    assert info["endpoint"] == "https://dbpedia.org/sparql"
    assert info["search"] == "dbpedia-lookup" and info["search_endpoint"] == "https://lookup.dbpedia.org/api/search"
    assert info["user_agent"] == info["search_user_agent"] == user_agent(remote_settings)


def test_sparql_wikidata_uses_the_generic_mapping(remote_settings: Settings) -> None:
    info = _info("sparql+wikidata:https://qlever.example.org/api/wikidata", remote_settings)
    assert info["store"] == "wikidata-sparql" and info["mapping"] == "WikidataMapping"
    assert info["blazegraph"] is False  # Blazegraph-only SPARQL is for WDQS alone
    assert info["endpoint"] == "https://qlever.example.org/api/wikidata"
    assert info["search"] == "wikidata-wapi" and info["user_agent"] == user_agent(remote_settings)


def test_sparql_dbpedia(remote_settings: Settings) -> None:
    info = _info("sparql+dbpedia:https://dbpedia.example.org/sparql", remote_settings)
    assert (info["store"], info["mapping"], info["endpoint"]) == (
        "kifqa-virtuoso", "DBpediaMapping", "https://dbpedia.example.org/sparql")  # queries posted as forms
    assert info["search"] == "dbpedia-lookup" and info["user_agent"] == user_agent(remote_settings)


def test_generic_kif_spec(remote_settings: Settings) -> None:
    spec = "kif:wikidata-sparql?iri=http://example.org/sparql&search=wikidata-wapi&page_size=50&distinct=false"
    resolved = resolve(spec, remote_settings)
    store, search = resolved.store, resolved.search
    info = endpoint_info(store, search)
    assert (info["store"], info["endpoint"], info["search"]) == (
        "wikidata-sparql", "http://example.org/sparql", "wikidata-wapi")
    assert store.page_size == 50 and store.distinct is False
    assert isinstance(resolve("kif:empty", remote_settings).search, Search)


@pytest.mark.parametrize(("spec", "message"), [
    ("nonsense", "(?s)unknown KB spec 'nonsense'; valid forms:.*local-server.*sparql\\+wikidata:URL.*kif:STORE"),
    ("sparql+wikidata:ftp://x", "needs an http\\(s\\) URL"),
    ("sparql+dbpedia:", "needs an http\\(s\\) URL"),
    ("local-server:http", "'http' is not a port number"),
    ("kif:no-such-store", "no KIF store plugin 'no-such-store'; known: .*wdqs"),
    ("kif:wdqs?search=no-such-search", "no KIF search plugin 'no-such-search'; known: .*wikidata-wapi"),
])
def test_bad_specs_are_config_errors(remote_settings: Settings, spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(spec, remote_settings)


def test_local_without_data_is_a_data_error(remote_settings: Settings) -> None:
    with pytest.raises(Exception, match="KIFQA_DATA_DIR") as err:
        resolve("local", remote_settings)
    assert type(err.value).__name__ == "DataError"


def test_local_without_build_says_how_to_build(tiny_settings: Callable[..., Settings]) -> None:
    with pytest.raises(KBError, match="run `kifqa kb build`"):
        open_kb("local", tiny_settings())


def test_open_kb_defaults_to_the_settings_spec(remote_settings: Settings) -> None:
    split = open_kb(None, remote_settings.model_copy(update={"kb": KBSettings(spec="wikidata", contact=CONTACT)}))
    try:
        # Public Wikidata: the main graph, and the scholarly articles' graph on its own host.
        assert isinstance(split, ScholarlySplit)
        kb, articles = split.main, split.scholarly
        assert kb.spec == "wikidata" and isinstance(kb.store, Store) and kb.index is None
        # In process, each public host keeps its own `batch.limits` entry: the API is serial.
        assert isinstance(kb.request_gate, LocalGate) and isinstance(kb.search_gate, LocalGate)
        assert kb.search_gate.requests.limit.max_concurrent == 1
        assert kb.request_gate.requests.limit == remote_settings.batch.limits["query.wikidata.org"]
        assert endpoint_info(articles.store, articles.search)["endpoint"] == "https://query-scholarly.wikidata.org/sparql"
        assert isinstance(articles.request_gate, LocalGate) and articles.request_gate is not kb.request_gate
        assert articles.request_gate.requests.limit == remote_settings.batch.limits["query-scholarly.wikidata.org"]
    finally:
        asyncio.run(split.aclose())


def test_the_kb_cache_keeps_a_mirrors_answers_apart(remote_settings: Settings) -> None:
    from types import SimpleNamespace

    from kifqa.batch.kbpool import _namespace
    public = remote_settings.override(kb={"spec": "wikidata"})
    mirrored = _mirrored(public, {"query.wikidata.org": "http://mirror:7001/sparql"})
    kb: Any = SimpleNamespace(build=None)
    assert _namespace(public, kb) != _namespace(mirrored, kb)
    assert _namespace(mirrored, kb) == _namespace(_mirrored(public, {"query.wikidata.org": "http://mirror:7001/sparql"}),
                                                  kb)


def test_the_routes_of_a_spec_are_found_once_without_opening_it(remote_settings: Settings) -> None:
    """What a job's checks, limits and KB placement read: hosts and URL, each spec resolved once; the local
    builds (none built here) are not opened for it."""
    from kifqa.kb.spec import KBRoutes, kb_routes

    def routed(spec: str, settings: Settings = remote_settings) -> KBRoutes:
        return kb_routes(settings.override(kb={"spec": spec}))

    agent = user_agent(remote_settings)
    assert routed("wikidata") == KBRoutes(spec="wikidata", host="query.wikidata.org", search_host="www.wikidata.org",
                                          scholarly_host="query-scholarly.wikidata.org",
                                          url="https://query.wikidata.org/sparql", user_agent=agent)
    main_only = remote_settings.override(kb={"endpoints": {"query.wikidata.org": "http://mirror:7001/sparql"}})
    assert routed("wikidata", main_only).scholarly_host is None  # a full mirror holds the articles itself
    assert routed("kif:wdqs").scholarly_host is None
    assert routed(" kif:wdqs ").host == "query.wikidata.org"
    assert routed("sparql+dbpedia:https://dbpedia.example/sparql").url == "https://dbpedia.example/sparql"
    for local in ("local", "local-hard", "local-dbpedia"):  # not built: nothing is opened for the routes
        assert routed(local) == KBRoutes(spec=local, user_agent=agent)
    unnamed = routed("dbpedia", remote_settings.override(kb={"contact": ""}))
    assert unnamed.no_contact is not None and "set kb.contact" in unnamed.no_contact
    assert routed("dbpedia").no_contact is None
    with pytest.raises(ConfigError, match="unknown KB spec 'wikidata:x'"):
        routed("wikidata:x")
    with pytest.raises(ConfigError, match="unknown KB spec 'kif:'"):
        routed("kif:")


def test_the_kb_cache_keeps_the_api_and_sparql_lookups_apart(remote_settings: Settings) -> None:
    """``kb.wikidata_lookups`` answers through other services and code (``wbgetentities``' best-ranked claims and
    terms, or KIF's ``wdqs`` queries): a result one path cached is never served to the other."""
    from types import SimpleNamespace

    from kifqa.batch.kbpool import _namespace
    kb: Any = SimpleNamespace(build=None)
    api, sparql = (remote_settings.override(kb={"spec": "wikidata", "wikidata_lookups": mode})
                   for mode in ("api", "sparql"))
    assert _namespace(api, kb) != _namespace(sparql, kb)
    assert _namespace(api, kb) == _namespace(remote_settings.override(kb={"spec": "wikidata"}), kb)  # the default
