"""The SPARQL text a KIF SPARQL store sends for a filter, compiled with the store's own mapping, and
:class:`ShapeCompiler`, which compiles each filter shape once and binds entities into its text
(:class:`BatchShapes` many entities, :class:`NameShape` many names)."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from kif_lib import AliasProperty, Datatype, Filter, LabelProperty, Statement, Store, Text, VariablePattern
from kif_lib.compiler.sparql import SPARQL_FilterCompiler
from kif_lib.compiler.sparql.mapping import SPARQL_Mapping
from kif_lib.compiler.sparql.mapping.wikidata import WikidataMapping
from kif_lib.compiler.sparql.results import SPARQL_Results
from kif_lib.model import Entity, OrFingerprint, Property, Value, ValueSnak
from kif_lib.store.mixer import MixerStore
from kif_lib.store.sparql.sparql_core import _CoreSPARQL_Store

#: What a compiled query selects (whole statements, or one of their parts).
Projection = SPARQL_FilterCompiler.Projection


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
    _, queries = compile_queries(core, filter, projection=Projection.ALL, limit=limit, distinct=True)
    return "\n\n".join(queries)


def compile_queries(store: _CoreSPARQL_Store, filter: Filter, *, projection: Projection, limit: int,
                    distinct: bool) -> tuple[SPARQL_FilterCompiler, tuple[str, ...]]:
    """KIF's compiler of ``filter`` for ``store``'s mapping and the SPARQL text of each of its queries."""
    if projection != Projection.ALL:  # as KIF's store does: projected values are value snaks
        filter = filter.replace(snak_mask=Filter.VALUE_SNAK)
    compiler = SPARQL_FilterCompiler(filter, store.mapping)
    compiler.compile()
    return compiler, tuple(
        str(compiler.build_query(query=q, projection=projection, distinct=distinct, limit=limit, offset=0))
        for q in compiler.query_stack)


#: Characters an IRI may not contain inside SPARQL's ``<...>`` (SPARQL 1.1, IRIREF).
_NOT_IN_IRIREF = re.compile(r'[\x00-\x20<>"{}|^`\\]')

#: The local name of the stand-in entity a shape is compiled with (a Wikidata-style id, so that
#: mappings that check ids accept it).
_STAND_IN = "999999999937"
#: The local name of a batch shape's second stand-in (an OR needs two entities).
_STAND_IN_2 = "999999999938"

#: A one-variable ``VALUES`` block as KIF writes an OR of two terms.
_VALUES = re.compile(r"VALUES \((\?\w+)\) \{\s*\((<[^>]*>)\)\s*\((<[^>]*>)\)\s*\}")



@dataclass(frozen=True)
class BoundQuery:
    """A shape's compiled queries with the real entity bound in, and how to read their results."""

    compiler: SPARQL_FilterCompiler
    queries: tuple[str, ...]
    projection: Projection
    stand_in: Entity
    entity: Entity

    @property
    def sparql(self) -> str:
        """The SPARQL text sent (queries blank-line separated), for the trace."""
        return "\n\n".join(self.queries)

    def read(self, results: list[SPARQL_Results]) -> list[Any]:
        """The terms the results of :attr:`queries` (in order) give, through KIF's own result builder:
        statements (stand-in replaced by the real entity) or, projected, their parts."""
        push = self.compiler.build_results()
        pattern = self.compiler.pattern
        assert isinstance(pattern, VariablePattern)  # a filter's compiler starts from one (as KIF asserts)
        variable = pattern.variable
        out = []
        for result in results:
            for binding in itertools.chain(result.get("results", {}).get("bindings", []), ({},)):
                for theta in push(binding) or ():
                    # A statement, or (a projection) a statement template with the parts not asked left open.
                    statement: Any = variable.instantiate(theta)
                    out.append(self._project(self._rebind(statement)))
        return out

    def _rebind(self, s: Statement) -> Statement:
        if s.subject == self.stand_in:
            s = Statement(self.entity, s.snak)
        if isinstance(s.snak, ValueSnak) and s.snak.value == self.stand_in:
            s = Statement(s.subject, ValueSnak(s.snak.property, self.entity))
        return s

    def _project(self, s: Statement) -> Any:
        if self.projection == Projection.ALL:
            return s
        if self.projection == Projection.PROPERTY:
            return s.snak.property
        raise ValueError(f"unsupported projection {self.projection}")


class ShapeCompiler:
    """Compiles each filter *shape* once and binds entities into its SPARQL text.

    KIF compiles a filter to SPARQL in tens of milliseconds, while the pipeline's filters have a few
    fixed shapes (an entity's statements either way; an entity's statements of one property) that
    differ only in the entity. A shape is the filter with the entity replaced by a stand-in of the
    same kind and namespace; it is compiled once by KIF's own compiler, and a query binds the real
    entity by replacing the stand-in's ``<IRI>`` in the compiled text. Results go through KIF's own
    result builder of that compilation. A shape whose text does not hold the stand-in only as an IRI
    (a mapping that rewrites entity IRIs) is compiled per filter instead.
    """

    def __init__(self, store: _CoreSPARQL_Store, *, max_shapes: int = 4096) -> None:
        self.store = store
        self.max_shapes = max_shapes
        self._shapes: dict[tuple[Any, ...], tuple[SPARQL_FilterCompiler, tuple[str, ...]] | None] = {}
        self.compiled = 0

    def bind(self, make: Callable[[Entity], Filter], entity: Entity, *, projection: Projection,
             limit: int, distinct: bool) -> BoundQuery:
        """The queries of ``make(entity)``: ``make`` builds the filter around the entity it is given."""
        stand_in = _stand_in(entity)
        real = entity.iri.content
        key = (make(stand_in), projection, limit, distinct)
        try:
            shape = self._shapes[key]
        except KeyError:
            shape = self._compile(key[0], stand_in, projection, limit, distinct)
            if len(self._shapes) >= self.max_shapes:
                self._shapes.clear()
            self._shapes[key] = shape
        if shape is None or _NOT_IN_IRIREF.search(real):
            compiler, queries = self._compile_queries(make(entity), projection, limit, distinct)
            return BoundQuery(compiler, queries, projection, entity, entity)
        compiler, texts = shape
        iri = f"<{stand_in.iri.content}>"
        return BoundQuery(compiler, tuple(t.replace(iri, f"<{real}>") for t in texts), projection, stand_in, entity)

    def _compile(self, f: Filter, stand_in: Entity, projection: Projection, limit: int,
                 distinct: bool) -> tuple[SPARQL_FilterCompiler, tuple[str, ...]] | None:
        compiler, queries = self._compile_queries(f, projection, limit, distinct)
        iri = f"<{stand_in.iri.content}>"
        if any(t.replace(iri, "").count(_STAND_IN) for t in queries) or not any(iri in t for t in queries):
            return None
        return compiler, queries

    def _compile_queries(self, f: Filter, projection: Projection, limit: int,
                         distinct: bool) -> tuple[SPARQL_FilterCompiler, tuple[str, ...]]:
        self.compiled += 1
        return compile_queries(self.store, f, projection=projection, limit=limit, distinct=distinct)


def _stand_in(entity: Entity, name: str = _STAND_IN) -> Entity:
    """An entity of ``entity``'s class and namespace (a property keeps its datatype) whose local name is
    ``name``, keeping the local name's first letter (``Q``, ``P``...)."""
    iri = entity.iri.content
    cut = max(iri.rfind("/"), iri.rfind("#")) + 1
    head = iri[cut:cut + 1] if iri[cut:cut + 1].isalpha() else ""
    if isinstance(entity, Property):
        return Property(iri[:cut] + head + name, entity.range)
    return type(entity)(iri[:cut] + head + name)


class Row(NamedTuple):
    """A value statement read from a SPARQL result without building KIF objects for it: entity IRIs as strings,
    a literal value as KIF's value. A part a projected query does not ask is ``None``."""

    #: The subject entity's IRI.
    subject: str | None
    #: The property's IRI.
    property: str | None
    #: The property's datatype (for an entity value, the value's: an item's, a property's or a lexeme's).
    datatype: Datatype | None
    #: An entity value's IRI, or a literal value.
    value: str | Value | None


def row_of(statement: Any) -> Row:
    """The :class:`Row` of a KIF statement, or of a statement template whose open parts are left ``None``."""
    snak = statement.snak
    prop = snak.property
    subject = statement.subject.iri.content if isinstance(statement.subject, Entity) else None
    property, datatype = (prop.iri.content, prop.range) if isinstance(prop, Property) else (None, None)
    value = getattr(snak, "value", None)
    if isinstance(value, Entity):
        return Row(subject, property, value.datatype, value.iri.content)
    return Row(subject, property, datatype, value if isinstance(value, Value) else None)


class RowReader:
    """Reads a compiled filter's SPARQL results as :class:`Row` s.

    KIF's result builder takes ~100-250 µs a row, most of it building and checking KIF objects. Where the
    store's mapping checks entity IRIs without changing or refusing any (KIF's Wikidata mapping, not strict,
    no IRI replacement), a row of IRIs only is read by a *recipe* instead: which of the row's variables
    gives the subject, the property and the value, and the datatype, learnt from KIF's own reading of the
    first such row of the same query branch. Every other row (literals, other mappings) is read by KIF.
    """

    def __init__(self, compiler: SPARQL_FilterCompiler) -> None:
        self.compiler = compiler
        self.fast = _checks_no_iri(compiler.mapping)
        #: (branch, variables) -> the recipe (the variables of subject, property and value; the datatype);
        #: ``None``: KIF reads that branch's rows.
        self._recipes: dict[tuple[str, tuple[str, ...]], tuple[str | None, str | None, str | None, Any] | None] = {}

    def read(self, result: SPARQL_Results) -> list[Row]:
        """The rows of ``result``, in its order."""
        push = self.compiler.build_results()
        variable = self.compiler.pattern.variable  # type: ignore[attr-defined]  # a filter compiles to a VariablePattern
        out: list[Row] = []
        for binding in result.get("results", {}).get("bindings", []):
            key = self._key(binding) if self.fast else None
            recipe = self._recipes.get(key) if key is not None else None
            if recipe is not None:
                s, p, v, datatype = recipe
                out.append(Row(s and binding[s]["value"], p and binding[p]["value"], datatype,
                               v and binding[v]["value"]))
                continue
            rows = [row_of(variable.instantiate(theta)) for theta in push(binding) or ()]
            if key is not None and key not in self._recipes and len(rows) == 1:
                self._learn(key, binding, rows[0])
            out += rows
        out += [row_of(variable.instantiate(theta)) for theta in push({}) or ()]  # what KIF holds back, if anything
        return out

    @staticmethod
    def _key(binding: dict[str, Any]) -> tuple[str, tuple[str, ...]] | None:
        """A row's branch (its one literal, the integer KIF binds to name the branch) and variables; ``None``
        unless every other term is an IRI."""
        branch = None
        for term in binding.values():
            if term["type"] == "uri":
                continue
            if branch is not None or term["type"] != "literal" or term.get("datatype") != _XSD_INTEGER:
                return None
            branch = term["value"]
        return (branch, tuple(sorted(binding))) if branch is not None else None

    def _learn(self, key: tuple[str, tuple[str, ...]], binding: dict[str, Any], row: Row) -> None:
        """Remembers how ``row`` (KIF's reading of ``binding``) comes from its variables; a part that is
        not one variable's IRI leaves the branch to KIF."""
        parts: list[str | None] = []
        for part in (row.subject, row.property, row.value):
            if part is None:
                parts.append(None)
                continue
            names = [name for name, term in binding.items() if term["type"] == "uri" and term["value"] == part]
            if not names:  # a literal value, or a part the query fixed
                self._recipes[key] = None
                return
            if len(names) > 1:
                return  # two variables hold the same IRI here: learn from another row
            parts.append(names[0])
        self._recipes[key] = (parts[0], parts[1], parts[2], row.datatype)


def _checks_no_iri(mapping: SPARQL_Mapping) -> bool:
    """True if ``mapping`` reads every entity IRI of a result as it is (KIF 0.13's Wikidata mapping, not strict
    and with no IRI replacement: its checks of item, property and lexeme IRIs then pass any IRI unchanged)."""
    return (type(mapping) is WikidataMapping and not mapping.options.strict
            and mapping._repl_item_uri is None and mapping._repl_property_uri is None
            and mapping._repl_lexeme_uri is None)


#: The datatype of the integer KIF binds to name a result's query branch.
_XSD_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"


@dataclass(frozen=True)
class BatchQuery:
    """One query over many lookups: ``keys`` (entities, or (entity, property) pairs) bound in one
    ``VALUES`` block, and the reader of its results."""

    reader: RowReader
    query: str

    def read(self, result: SPARQL_Results) -> list[Row]:
        """The statements (or, projected, their parts asked) the result gives."""
        return self.reader.read(result)


class BatchShapes:
    """Compiles each batch shape once and binds many lookups into one query.

    A batch shape is a filter whose entity (and, for ``facts``, property) is an OR of two stand-ins,
    which KIF compiles to one ``VALUES`` block each; a batch replaces them by one block of the real
    entities (or of (entity, property) pairs, so that no pair outside the batch is asked). The query's
    ``LIMIT`` is the shape's, for the whole batch: callers check it (:attr:`BatchQuery.query`'s rows
    reaching it means the batch may be cut). A shape whose text holds the stand-ins elsewhere than in
    those blocks cannot be batched (:meth:`bind` returns ``None``).
    """

    def __init__(self, store: _CoreSPARQL_Store, *, max_shapes: int = 1024) -> None:
        self.store = store
        self.max_shapes = max_shapes
        self._shapes: dict[tuple[Any, ...], tuple[RowReader, str, tuple[str, str, str, str]] | None] = {}

    def bind(self, make: Callable[[Any, Any], Filter], keys: list[tuple[Entity, Property | None]], *,
             projection: Projection, limit: int) -> BatchQuery | None:
        """The query of the lookups ``keys``; ``make(entities, properties)`` builds the filter around an OR
        of entities and an OR of properties (``None`` when the keys have no property)."""
        entity, prop = keys[0]
        entities = (_stand_in(entity), _stand_in(entity, _STAND_IN_2))
        props = None if prop is None else (_stand_in(prop), _stand_in(prop, _STAND_IN_2))
        key = (make(OrFingerprint(*entities), props and OrFingerprint(*props)), projection, limit)
        if key in self._shapes:
            shape = self._shapes[key]
        else:
            shape = self._compile(key[0], entities, props, projection, limit)
            if len(self._shapes) >= self.max_shapes:
                self._shapes.clear()
            self._shapes[key] = shape
        if shape is None or any(_NOT_IN_IRIREF.search(x.iri.content) for k in keys for x in k if x is not None):
            return None
        reader, text, (entity_var, prop_var, entity_block, prop_block) = shape
        if prop is None:
            rows = " ".join(f"(<{e.iri.content}>)" for e, _ in keys)
            return BatchQuery(reader, text.replace(entity_block, f"VALUES ({entity_var}) {{ {rows} }}"))
        rows = " ".join(f"(<{e.iri.content}> <{p.iri.content}>)" for e, p in keys if p is not None)
        return BatchQuery(reader, text.replace(entity_block, f"VALUES ({entity_var} {prop_var}) {{ {rows} }}")
                          .replace(prop_block, ""))

    def _compile(self, f: Filter, entities: tuple[Entity, Entity], props: tuple[Entity, Entity] | None,
                 projection: Projection, limit: int
                 ) -> tuple[RowReader, str, tuple[str, str, str, str]] | None:
        compiler, queries = compile_queries(self.store, f, projection=projection, limit=limit, distinct=True)
        if len(queries) != 1:
            return None
        text = queries[0]
        blocks = {frozenset(m.group(2, 3)): (m.group(1), m.group(0)) for m in _VALUES.finditer(text)}
        entity = blocks.get(frozenset(f"<{e.iri.content}>" for e in entities))
        prop = blocks.get(frozenset(f"<{p.iri.content}>" for p in props)) if props else ("", "")
        if entity is None or prop is None:
            return None
        rest = text.replace(entity[1], "").replace(prop[1], "") if props else text.replace(entity[1], "")
        if _STAND_IN in rest or _STAND_IN_2 in rest:
            return None
        return RowReader(compiler), text, (entity[0], prop[0], entity[1], prop[1])


#: The stand-in names a :class:`NameShape` is compiled with.
_STAND_IN_NAMES = ("kifqa stand-in 1", "kifqa stand-in 2")


class NameShape:
    """The query asking which of many names are an item's English label or alias, and of which items: KIF compiles
    it once, for two stand-in names, and :meth:`bind` writes the real ones into its ``VALUES`` blocks (KIF's compiler
    takes ~0.7 ms a name). :meth:`create` gives ``None`` where the store's mapping compiles it otherwise."""

    #: Rows a query may ask for each name (the items it names in its spellings), and at most in all (DBpedia's
    #: endpoint answers at most 10,000).
    ROWS_PER_NAME, MAX_ROWS = 50, 10_000

    def __init__(self, store: _CoreSPARQL_Store, text: str, block: re.Pattern[str]) -> None:
        self.store = store
        self._text = text
        self._block = block

    @classmethod
    def create(cls, store: _CoreSPARQL_Store) -> NameShape | None:
        """The shape for ``store``'s mapping, or ``None``."""
        f = Filter(subject_mask=Filter.ITEM, property=OrFingerprint(LabelProperty(), AliasProperty()),
                   value=OrFingerprint(*(Text(n, "en") for n in _STAND_IN_NAMES)), snak_mask=Filter.VALUE_SNAK)
        try:
            _, queries = compile_queries(store, f, projection=Projection.SUBJECT | Projection.VALUE, limit=1,
                                         distinct=True)
        except Exception:  # noqa: BLE001 - a mapping without labels or aliases: no such query
            return None
        first, second = (re.escape(json.dumps(n) + "@en") for n in _STAND_IN_NAMES)
        block = re.compile(rf"\({first}\)\s*\({second}\)")
        if len(queries) != 1 or not block.search(queries[0]) or any(
                n in block.sub("", queries[0]) for n in _STAND_IN_NAMES):
            return None
        return cls(store, queries[0], block)

    def limit(self, names: list[str]) -> int:
        """The ``LIMIT`` of the query for ``names``: a result that reaches it may be cut."""
        return min(self.MAX_ROWS, self.ROWS_PER_NAME * len(names) + 1)

    def bind(self, names: list[str]) -> str:
        """The query for ``names``."""
        rows = " ".join(f"({json.dumps(n, ensure_ascii=False)}@en)" for n in names)
        limited = re.sub(r"LIMIT 1\b", f"LIMIT {self.limit(names)}", self._text)  # before the names go in
        return self._block.sub(lambda _: rows, limited)

    @staticmethod
    def read(result: SPARQL_Results) -> list[tuple[str, str]]:
        """The (item IRI, name) pairs of a result, one a row."""
        pairs = []
        for binding in result.get("results", {}).get("bindings", []):
            iris = [t["value"] for t in binding.values() if t.get("type") == "uri"]
            names = [t["value"] for t in binding.values() if t.get("type") == "literal" and "xml:lang" in t]
            pairs += [(iri, name) for iri in iris[:1] for name in names[:1]]
        return pairs
