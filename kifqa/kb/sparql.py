"""The SPARQL text a KIF SPARQL store sends for a filter, compiled with the store's own mapping."""

from __future__ import annotations

from kif_lib import Filter, Store
from kif_lib.compiler.sparql import SPARQL_FilterCompiler
from kif_lib.store.mixer import MixerStore
from kif_lib.store.sparql.sparql_core import _CoreSPARQL_Store


def sparql_store(store: Store) -> _CoreSPARQL_Store | None:
    """The SPARQL store doing the work of ``store`` (itself, or the single source of a mixer), if any."""
    while isinstance(store, MixerStore) and len(store.sources) == 1:
        store = next(iter(store.sources))
    return store if isinstance(store, _CoreSPARQL_Store) else None


def compile_filter(store: Store, filter: Filter, *, limit: int) -> str:
    """The SPARQL queries (one per disjoint part, blank-line separated) ``store`` runs for ``filter``;
    ``""`` if ``store`` does not speak SPARQL."""
    core = sparql_store(store)
    if core is None:
        return ""
    compiler = SPARQL_FilterCompiler(filter, core.mapping)
    compiler.compile()
    return "\n\n".join(
        str(compiler.build_query(query=q, projection=compiler.Projection.ALL, distinct=True, limit=limit, offset=0))
        for q in compiler.query_stack
    )
