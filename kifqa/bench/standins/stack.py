"""The stand-ins of one public knowledge base started together over the local builds, and the ``kb.endpoints``
that point ``--kb wikidata`` or ``--kb dbpedia`` at them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from kifqa.bench.standins.dbpedia_lookup import DBpediaLookupLike
from kifqa.bench.standins.wikidata_api import WikidataAPILike
from kifqa.bench.wdqs_like import WDQSLike
from kifqa.config import Settings
from kifqa.kb import dbpedia
from kifqa.kb.build import locate
from kifqa.kb.server import OxigraphServer
from kifqa.kb.virtuoso import VirtuosoServer


@dataclass(frozen=True)
class WikidataStandIns:
    """WDQS (a WDQS-like front in Blazegraph's dialect over the built base's Oxigraph) and the Wikidata API."""

    sparql: WDQSLike
    api: WikidataAPILike

    @property
    def endpoints(self) -> dict[str, str]:
        """``kb.endpoints`` for ``--kb wikidata``."""
        return {"query.wikidata.org": self.sparql.url, "www.wikidata.org": self.api.url}


@dataclass(frozen=True)
class DBpediaStandIns:
    """DBpedia's SPARQL endpoint (a Virtuoso loaded with the DBpedia-encoded build) and DBpedia Lookup."""

    sparql: VirtuosoServer
    lookup: DBpediaLookupLike

    @property
    def endpoints(self) -> dict[str, str]:
        """``kb.endpoints`` for ``--kb dbpedia``."""
        return {"dbpedia.org": self.sparql.url, "lookup.dbpedia.org": self.lookup.url}


@contextmanager
def wikidata_standins(settings: Settings, *, sparql: dict[str, Any] | None = None,
                      api: dict[str, Any] | None = None, hard: bool = False) -> Iterator[WikidataStandIns]:
    """Starts the Wikidata stand-ins over the built base (``hard``: the hard base, its homonyms in the API's search;
    ``sparql`` and ``api``: options of :class:`WDQSLike` and :class:`WikidataAPILike`); stops them on exit. The
    API's ``wbgetentities`` gives the build's statements as claims."""
    built = locate(settings, hard=hard)
    with ExitStack() as stack:
        oxigraph = stack.enter_context(OxigraphServer(built.store_dir))
        front = stack.enter_context(WDQSLike(oxigraph.url, **{"dialect": "blazegraph", **(sparql or {})}))
        yield WikidataStandIns(front, stack.enter_context(WikidataAPILike(
            built.index_path, **{"statements": oxigraph.url, **(api or {})})))


@contextmanager
def dbpedia_standins(settings: Settings, *, lookup: dict[str, Any] | None = None) -> Iterator[DBpediaStandIns]:
    """Starts the DBpedia stand-ins over the DBpedia-encoded build (built if needed); stops them on exit."""
    built = dbpedia.build(settings)[0]
    with ExitStack() as stack:
        virtuoso = stack.enter_context(VirtuosoServer(built.rdf_path, graph=dbpedia.GRAPH))
        yield DBpediaStandIns(virtuoso, stack.enter_context(DBpediaLookupLike(built.index_path, **(lookup or {}))))
