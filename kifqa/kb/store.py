"""KIF store plugin ``kifqa-oxigraph``: KIF's SPARQL store over an on-disk pyoxigraph store, in process.

It reuses KIF's SPARQL compiler and (by default) its Wikidata mapping; only the backend is new. The
store is opened read-only, so several processes (and an ``oxigraph serve-read-only``) can share it.
Oxigraph's result order is not stable across OFFSET pages, so the page size defaults to one page larger
than any result of the built base.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyoxigraph
from kif_lib.compiler.sparql import SPARQL_Mapping
from kif_lib.compiler.sparql.results import SPARQL_Results
from kif_lib.model import KIF_Object
from kif_lib.store.sparql.sparql_core import _CoreSPARQL_Store

#: Default page size: above the largest result a filter can return from the built base.
PAGE_SIZE = 1_000_000


class OxigraphStore(
    _CoreSPARQL_Store,
    store_name="kifqa-oxigraph",
    store_description="SPARQL store over an on-disk Oxigraph database, read-only and in process",
):
    """KIF store over the pyoxigraph database at ``path``.

    Args:
        store_name: Name of the store plugin to instantiate.
        path: Folder of the Oxigraph database.
        mapping: SPARQL mapping (default: KIF's Wikidata mapping).
        kwargs: Other store options (``page_size``, ``limit``, ``timeout``...).
    """

    class OxigraphBackend(_CoreSPARQL_Store.Backend):
        """Backend answering SPARQL with a read-only pyoxigraph store."""

        __slots__ = ("_db",)

        def __init__(self, store: _CoreSPARQL_Store, path: str | Path, **kwargs: Any) -> None:
            super().__init__(store)
            try:
                self._db = pyoxigraph.Store.read_only(str(path))
            except Exception as err:  # OSError, RuntimeError("Corruption: ...")
                raise KIF_Object._arg_error(
                    f"cannot open Oxigraph store {path}: {err}", type(store), "path", exception=store.Error
                ) from err

        async def _aselect(self, query: str, timeout: float | None = None) -> SPARQL_Results:
            # In the calling thread: a local query takes less than the hop to a worker thread and back.
            return self._select(query, timeout)

        def _select(self, query: str, timeout: float | None = None) -> SPARQL_Results:
            results = self._db.query(query)
            assert not isinstance(results, pyoxigraph.QueryTriples)  # KIF sends SELECT and ASK queries only
            data = results.serialize(format=pyoxigraph.QueryResultsFormat.JSON)
            assert data is not None  # given no output, serialize returns the bytes
            return json.loads(data)

    def __init__(
        self,
        store_name: str,
        path: str | Path,
        mapping: SPARQL_Mapping | None = None,
        page_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            store_name,
            mapping if mapping is not None else self._wikidata_mapping_constructor(),
            self.OxigraphBackend,
            path=path,
            page_size=page_size or PAGE_SIZE,
            **kwargs,
        )
