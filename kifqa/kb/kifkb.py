""":class:`KifKnowledgeBase`: the :class:`~kifqa.kb.base.KnowledgeBase` interface over a KIF (Store, Search) pair.

KIF stores are not thread-safe and their async HTTP clients belong to the event loop that first used
them, so each knowledge base owns a private event loop on a daemon thread and runs every KIF call
there (through KIF's async API, under :class:`~kifqa.kb.guard.Guard`). Callers may await it from any
event loop and run many coroutines on it at once.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar

from kif_lib import (
    IRI,
    AliasProperty,
    Datatype,
    DescriptionProperty,
    ExternalId,
    Filter,
    ItemDatatype,
    LabelProperty,
    Property,
    PropertyDatatype,
    Quantity,
    Search,
    Statement,
    Store,
    String,
    Text,
    Time,
)
from kif_lib.compiler.sparql.results import SPARQL_Results
from kif_lib.model import Entity, OrFingerprint, Value
from kif_lib.store.mixer import MixerStore
from kif_lib.store.sparql.sparql_core import _CoreSPARQL_Store

from kifqa.config import KBSettings
from kifqa.data.ids import is_sparql_iri
from kifqa.data.text import index_key, spaced, spellings, typed_key
from kifqa.errors import KBError
from kifqa.kb import ids
from kifqa.kb.anyword import AnyWordSearch
from kifqa.kb.base import EntityProperties, FilterResult, Hits, KBStats, KnowledgeBase, PropertyUse
from kifqa.kb.build import build_hash
from kifqa.kb.coalesce import Coalescer
from kifqa.kb.fallible import Fallible
from kifqa.kb.guard import Guard, RequestGate
from kifqa.kb.http import bound_searches, check_results
from kifqa.kb.index import LabelIndex
from kifqa.kb.search import LocalSearch, check_query
from kifqa.kb.services import SearchAnswerError
from kifqa.kb.sparql import (
    BatchQuery,
    BatchShapes,
    BoundQuery,
    NameShape,
    Projection,
    Row,
    ShapeCompiler,
    compile_filter,
    row_of,
    sparql_store,
)
from kifqa.redact import redact
from kifqa.types import Candidate, Direction, Fact

T = TypeVar("T")

_logger = logging.getLogger(__name__)

#: Entities per KIF label query of a remote knowledge base.
LABEL_BATCH = 50

#: Spellings per KIF query of :meth:`KifKnowledgeBase.named` on a base without a label index.
NAME_BATCH = 2000

#: KIF searches that find items only, and the namespace of the items they find (DBpedia Lookup indexes ``dbr:``
#: resources, not the ontology's classes, which KIF's DBpedia mapping also calls items): properties are found by their
#: English label through the store instead (:meth:`KifKnowledgeBase._labelled_properties`), and only the names of
#: items in that namespace are exact names (:meth:`KifKnowledgeBase.named`).
ITEM_ONLY_SEARCHES = {"dbpedia-lookup": "http://dbpedia.org/resource/"}

#: The name each kind of batched lookup runs under alone (that of its unbatched call, :meth:`KifKnowledgeBase._single`).
_SINGLE_KINDS = {"properties_of": "properties_of", "facts": "filter"}

#: A batched lookup's group: (kind, direction, the property's datatype for ``facts``).
_Group = tuple[str, Direction, Any]
#: A batched lookup: the entity, and the property for ``facts``.
_Key = tuple[Entity, Property | None]


class Masks(TypedDict, total=False):
    """The datatype masks of :func:`masks`, as :class:`~kif_lib.Filter` arguments."""

    subject_mask: Filter.DatatypeMask
    value_mask: Filter.DatatypeMask


class KifKnowledgeBase(KnowledgeBase):
    """A knowledge base over a KIF ``store`` and ``search``.

    Args:
        store: KIF store answering filters.
        search: KIF search finding entities and properties by name.
        spec: The spec it was opened from (for messages and traces; its credentials are masked).
        settings: Timeouts, retries, concurrency and result limits.
        index: The label index of a locally built base: labels and descriptions come from it; without
            one they are asked from ``store`` through KIF (and cached).
        fulltext: A full-text search of items (KIF ``wikidata-wapi-query``), asked when ``search`` finds no
            item that the text names: its words in any order, without punctuation, misspelt (``word~``). Where
            neither finds anything, ``search`` is asked for the text's shorter runs of words (:func:`_parts`)
            until one finds an item named so (:func:`_starts`); so is a search that finds items only
            (:data:`ITEM_ONLY_SEARCHES`: DBpedia Lookup, whose word queries want every word of the text). For such
            a search, the store's Virtuoso is then asked for names holding any uncommon word of the text
            (:meth:`_any_word_hits`), as the label index's last tier finds them.
    """

    def __init__(self, store: Store, search: Search, *, spec: str, settings: KBSettings,
                 index: LabelIndex | None = None, fulltext: Search | None = None) -> None:
        self.spec = redact(spec)
        self.store = store
        self.search = search
        self.fulltext = fulltext
        self.settings = settings
        self.index = index
        self.build = build_hash(index.path.parent) if index is not None else None
        # a cut, malformed or oversized SPARQL answer is an error, never a result
        check_results(_stores(store), max_bytes=settings.max_response_bytes)
        bound_searches([search, fulltext], max_bytes=settings.max_response_bytes)
        self.stats = KBStats()
        self._guard = Guard(self.spec, settings, self.stats)
        self._masks: Masks = masks(index) if index is not None else {}
        core = sparql_store(store)
        #: Each filter shape compiled once (``None``: the store does not speak SPARQL itself).
        self._shapes = ShapeCompiler(core) if core is not None else None
        #: Lookups of many callers coalesced into one query per kind (``kb.batch_size`` > 1).
        self._batch_shapes = BatchShapes(core) if core is not None and settings.batch_size > 1 else None
        self._coalescer: Coalescer[_Group, _Key, Any] = Coalescer(
            self._run_batch, size=settings.batch_size, wait_s=settings.batch_wait_s)
        #: The namespace of the items the search finds, when it finds items only (:data:`ITEM_ONLY_SEARCHES`).
        self._found_items = ITEM_ONLY_SEARCHES.get(search.search_name)
        #: The last tier of a search that finds items of one namespace only (DBpedia Lookup), on the store's Virtuoso.
        self._any_words = AnyWordSearch(functools.partial(self._any_word_select, core), self._found_items) \
            if core is not None and index is None and self._found_items is not None else None
        #: The searches that count as no hit when they fail (:mod:`kifqa.kb.fallible`).
        self._fallible = Fallible(self.spec)
        #: The query of ``named`` on a SPARQL store without a label index.
        self._name_shape = NameShape.create(core) if core is not None and index is None else None
        #: ``named`` lookups of many callers asked in one query (a base without a label index).
        self._names: Coalescer[str, frozenset[str], frozenset[str]] = Coalescer(
            self._named_batch, size=settings.batch_size, wait_s=settings.batch_wait_s)
        self._label_cache: dict[str, str] = {}
        self._properties: dict[tuple[str | None, Datatype | None], Property] = {}
        self._typed: dict[str, Property] = {}
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"kifqa-kb[{spec}]", daemon=True)
        self._thread.start()
        #: Stops the private loop when this knowledge base is closed or forgotten.
        self._stop_loop = weakref.finalize(self, self._loop.call_soon_threadsafe, self._loop.stop)

    # -- KnowledgeBase -------------------------------------------------------

    async def search_entities(self, text: str, *, limit: int = 10) -> Hits:
        return await self._run(self._search(text, limit, properties=False))

    async def search_properties(self, text: str, *, limit: int = 10) -> Hits:
        return await self._run(self._search(text, limit, properties=True))

    async def properties_of(self, entity: str) -> EntityProperties:
        return await self._run(self._properties_of(entity))

    async def facts(self, entity: str, property: str, direction: Direction) -> FilterResult:
        if direction not in ("forward", "backward"):
            raise KBError(f"direction must be 'forward' or 'backward', not {direction!r}")
        e, p = ids.entity(entity), self._typed_property(property)
        if self._batch_shapes is not None:
            return await self._run(self._batched_facts(e, p, direction))
        base: dict[str, Any] = {"property": p, "snak_mask": Filter.VALUE_SNAK, **self._masks}
        if direction == "forward":
            return await self._run(self._facts(lambda x: Filter(subject=x, **base), e))
        return await self._run(self._facts(lambda x: Filter(value=x, **base), e))

    async def labels(self, ids: list[str]) -> dict[str, str]:
        return await self._run(self._labels(ids))

    async def named(self, texts: list[str]) -> list[str] | None:
        """From the label index of a local build (one SQLite query, case, accents and punctuation folded).
        Otherwise from a SPARQL store's English item labels and aliases, which match exact strings: each text is
        asked in the spellings of :func:`~kifqa.data.text.spellings`, and lookups of concurrent callers share
        queries (``kb.batch_size``); where the search finds items of one namespace only (:data:`ITEM_ONLY_SEARCHES`),
        only those items' names count. ``None`` for a store that is neither."""
        if self.index is not None:
            return self.index.named(texts)
        if self._name_shape is None:
            return None
        asked = {t: spellings(t) for t in texts}
        if not asked:
            return []
        every = frozenset(s for spelt in asked.values() for s in spelt)
        if self.settings.batch_size > 1:
            found = await self._run(self._names.lookup("named", every))
        else:
            found = await self._run(self._found_names(every))
        return [t for t, spelt in asked.items() if not found.isdisjoint(spelt)]

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._submit(self._aclose_engines())
        finally:
            self._stop_loop()
            await asyncio.to_thread(self._thread.join)
            self._loop.close()
            if self.index is not None:
                self.index.close()

    async def select(self, query: str) -> dict[str, Any]:
        core = sparql_store(self.store)
        if core is None:
            return await super().select(query)
        result = await self._run(self._guard.run("select", lambda: core.backend.aselect(
            query, self.settings.timeout_s)))
        return dict(result)

    # -- beyond the interface ------------------------------------------------

    @property
    def request_gate(self) -> RequestGate | None:
        """What each HTTP request to the store waits for first (a limit shared with other processes)."""
        return self._guard.gate

    @request_gate.setter
    def request_gate(self, gate: RequestGate | None) -> None:
        self._guard.gate = gate

    @property
    def search_gate(self) -> RequestGate | None:
        """What each request of the search waits for first (its service's limit, when it is remote)."""
        return self._guard.gates["search"]

    @search_gate.setter
    def search_gate(self, gate: RequestGate | None) -> None:
        self._guard.gates["search"] = gate

    @property
    def batching(self) -> tuple[int, int]:
        """(batch queries sent, lookups they answered) so far."""
        return self._coalescer.batches, self._coalescer.lookups

    async def filter(self, subject: Entity | str | None = None, property: Property | str | None = None,
                     value: Entity | str | None = None) -> FilterResult:
        """The value statements matching the given subject, property and value (ids or KIF entities)."""
        if subject is None and property is None and value is None:
            raise KBError("give at least one of subject, property and value")
        f = Filter(
            subject=ids.entity(subject) if isinstance(subject, str) else subject,
            property=self._typed_property(property) if isinstance(property, str) else property,
            value=ids.entity(value) if isinstance(value, str) else value,
            snak_mask=Filter.VALUE_SNAK,
            **self._masks,
        )
        return await self._run(self._filter(f))

    # -- running on the private loop -----------------------------------------

    async def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise KBError(f"{self.spec}: the knowledge base is closed")
        return await self._submit(coro)

    async def _submit(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def _aclose_engines(self) -> None:
        engines: list[Store | Search] = [*_stores(self.store), self.search, *([self.fulltext] if self.fulltext else [])]
        for engine in engines:
            await engine.aclose()
            engine.close()

    # -- implementations (on the private loop) -------------------------------

    async def _search(self, text: str, limit: int, *, properties: bool) -> Hits:
        check_query(text)
        if not typed_key(text):
            return Hits()  # a text without a word (``-``, ``*``, ``?``) names nothing, on any search
        if properties and self.index is None and self._found_items is not None:
            return Hits(_scored(text, await self._labelled_properties(text, limit)))
        failed: list[str] = []
        kind = "search_properties" if properties else "search_entities"
        hits = await self._fallible.hits("the search", self._guard.run(
            kind, lambda: self._hits(text, limit, properties=properties), target="search"), failed,
            errors=(SearchAnswerError,))
        public = self.fulltext is not None or self._found_items is not None
        if not properties and public and not _names(text, hits):
            if self.fulltext is not None:
                hits += await self._fallible.hits("the full-text search", self._fulltext_hits(
                    text, limit, known={c.id for c in hits}), failed)
            searched, named_run = hits, False
            for part in [] if hits else _parts(text):
                found = await self._fallible.hits("the search of a shorter run", self._guard.run(
                    "search_entities", functools.partial(self._hits, part, limit, properties=False),
                    target="search"), failed)
                if hits := [c for c in found if _starts(part, c)]:
                    named_run = _names(part, hits)
                    break
            if self._any_words is not None and not named_run and len(searched) < limit:
                known = {c.id for c in searched}
                more = [c for c in await self._fallible.hits("the any-word search", self._any_word_hits(text, limit),
                                                             failed) if c.id not in known]
                hits = [*searched, *more][:limit] if searched else more or hits
        return Hits(_scored(text, hits), failed=failed)

    async def _any_word_hits(self, text: str, limit: int) -> list[Candidate]:
        """The resources whose label holds any uncommon word of ``text`` (:class:`~kifqa.kb.anyword.AnyWordSearch`),
        in its order: the last tier of a search that finds items of one namespace only, as the label index's is.
        They follow what the search found, up to ``limit``; where it found nothing, they take the place of what a
        shorter run found by its start ("Hearts and Armour" of "hearts and coronets comedy": "Kind Hearts and
        Coronets" holds more of the words), not of a name a run is. Where the store cannot answer it (a mirror
        without Virtuoso's free-text index, a query that timed out), the span's search stays as it was."""
        search = self._any_words
        assert search is not None
        return [Candidate(id=ids.to_id(n.iri), label=n.label) for n in await search.search(text, limit)]

    async def _hits(self, text: str, limit: int, *, properties: bool) -> list[Candidate]:
        """The search's hits for ``text`` in its order, unscored. KIF's search plugin over this base's own
        label index (:class:`~kifqa.kb.search.LocalSearch`) is read directly: the same hits, without
        building a KIF entity and descriptor for each only to read their strings back."""
        if isinstance(self.search, LocalSearch):
            return [Candidate(id=ids.to_id(ids.to_iri(h.entry.id)), label=h.entry.label,
                              aliases=tuple(sorted(set(h.entry.aliases))), description=h.entry.description)
                    for h in self.search.index.search("property" if properties else "item", text, limit)]
        find = self.search.aproperty_descriptor if properties else self.search.aitem_descriptor
        return [_candidate(entity, desc) for entity, desc in await _collect(find(text, limit=limit))]

    async def _labelled_properties(self, text: str, limit: int) -> list[Candidate]:
        """The properties whose English label is ``text`` in one of its :func:`~kifqa.data.text.spellings`, asked
        from the store in one query (its ``rdfs:label`` s for KIF's DBpedia mapping), described from the store."""
        names = [Text(s, "en") for s in spellings(text)]
        f = Filter(subject_mask=Filter.PROPERTY, property=LabelProperty(),
                   value=OrFingerprint(*names) if len(names) > 1 else names[0], snak_mask=Filter.VALUE_SNAK)
        statements, _ = await self._statements(f, "search_properties")
        found: list[Any] = list(dict.fromkeys(s.subject for s in statements))[:limit]
        described = await self._describe(found)
        return [described[ids.to_id(p)] for p in found]

    async def _fulltext_hits(self, text: str, limit: int, *, known: set[str]) -> list[Candidate]:
        """The items the full-text search finds for ``text``'s words (those of three letters or more may be
        misspelt), not in ``known``, described from the store as the prefix search's hits are (an alias that names
        the text makes its item a namesake)."""
        fulltext = self.fulltext
        assert fulltext is not None
        query = " ".join(w + "~" if len(w) > 2 else w for w in typed_key(text).split())
        items = await self._guard.run("search_fulltext", lambda: _collect(fulltext.aitem(query, limit=limit)),
                                      target="search")
        fresh = list(dict.fromkeys(item for item in items if ids.to_id(item) not in known))
        described = await self._described(fresh)
        return [c for item in fresh if (c := described.get(ids.to_id(item))) and c.label]

    async def _properties_of(self, entity: str) -> EntityProperties:
        e = ids.entity(entity)
        (forward, cut_forward), (backward, cut_backward) = await asyncio.gather(
            self._properties_one_way(e, "forward"), self._properties_one_way(e, "backward"))
        found: list[tuple[Property, Direction]] = [(p, "forward") for p in forward]
        found += [(p, "backward") for p in backward]
        distinct = list(dict.fromkeys(p for p, _ in found))
        described, types = await self._describe(distinct), self._value_types(distinct)
        uses = sorted((PropertyUse(property=described[ids.to_id(p)], direction=direction, value_type=types[p])
                       for p, direction in found), key=lambda u: (u.direction, _id_order(u.property.id)))
        return EntityProperties(uses=tuple(uses), truncated=cut_forward or cut_backward)

    async def _properties_one_way(self, e: Entity, direction: Direction) -> tuple[list[Property], bool]:
        """The distinct properties of ``e``'s statements ``direction``-wards, and whether there were more."""
        if self._batch_shapes is not None:
            found: tuple[list[Property], bool] = await self._coalescer.lookup(("properties_of", direction, None),
                                                                              (e, None))
            return found
        real = {"property_mask": Filter.PropertyMask.REAL, "snak_mask": Filter.VALUE_SNAK, **self._masks}
        return await self._distinct_properties(_around(direction, real), e)

    async def _distinct_properties(self, make: Callable[[Entity], Filter], e: Entity) -> tuple[list[Property], bool]:
        """The distinct properties of the statements ``make(e)`` selects (KIF's ``filter_p``), at most
        ``max_results``, and whether there were more."""
        limit = self.settings.max_results
        if self._shapes is not None:
            bound = self._shapes.bind(make, e, projection=Projection.PROPERTY, limit=limit + 1, distinct=True)
            found = await self._guard.run("properties_of", lambda: self._select(bound))
        else:
            found = await self._guard.run("properties_of", lambda: _collect(self.store.afilter_p(
                filter=make(e), distinct=True, limit=limit + 1, timeout=self.settings.timeout_s)))
        properties = list(dict.fromkeys(found))
        return properties[:limit], len(properties) > limit

    async def _facts(self, make: Callable[[Entity], Filter], e: Entity) -> FilterResult:
        """The statements ``make(e)`` selects, labelled, with the SPARQL sent."""
        limit = self.settings.max_results
        if self._shapes is None:
            return await self._filter(make(e))
        bound = self._shapes.bind(make, e, projection=Projection.ALL, limit=limit + 1, distinct=True)
        found = [row_of(s) for s in await self._guard.run("filter", lambda: self._select(bound))]
        return await self._labelled(found[:limit], f=make(e), sparql=bound.sparql, truncated=len(found) > limit)

    async def _batched_facts(self, e: Entity, p: Property, direction: Direction) -> FilterResult:
        """``facts`` answered within a batch of lookups of the same direction and datatype."""
        found, batch = await self._coalescer.lookup(("facts", direction, p.range), (e, p))
        make = _around(direction, {"property": p, "snak_mask": Filter.VALUE_SNAK, **self._masks})
        assert self._shapes is not None
        bound = self._shapes.bind(make, e, projection=Projection.ALL, limit=self.settings.max_results + 1,
                                  distinct=True)
        limit = self.settings.max_results
        return await self._labelled(found[:limit], f=make(e), sparql=bound.sparql, truncated=len(found) > limit,
                                    batch=batch)

    # -- batches (on the private loop) ---------------------------------------

    async def _run_batch(self, group: _Group, keys: list[_Key], *, halved: bool = False) -> list[Any]:
        """The results of one group's lookups ``keys``, by one query when it answers completely; a batch
        that fails or reaches its row cap is split in two and each half run again, so that a bad
        lookup costs only its own caller (a lookup left alone by a split runs as without batching). A
        lookup that came alone runs the batch query too (its rows are read without KIF objects) under
        the unbatched call's name; its error is its own. A lookup whose IRI no SPARQL query can carry
        fails alone before the batch is built."""
        kind, direction, _ = group
        if len(keys) == 1 and halved:
            return [await _outcome(self._single(group, keys[0]))]
        if uncarried := {i: err for i, k in enumerate(keys) if (err := _uncarried(k)) is not None}:
            rest = [k for i, k in enumerate(keys) if i not in uncarried]
            answered = iter(await self._run_batch(group, rest, halved=halved) if rest else [])
            return [uncarried[i] if i in uncarried else next(answered) for i in range(len(keys))]
        limit = self.settings.max_results
        real = {"property_mask": Filter.PropertyMask.REAL, "snak_mask": Filter.VALUE_SNAK, **self._masks}
        assert self._batch_shapes is not None
        if kind == "properties_of":
            make = _around(direction, real)
            projection = Projection.PROPERTY | (Projection.SUBJECT if direction == "forward" else Projection.VALUE)
            query = self._batch_shapes.bind(lambda es, _: make(es), keys, projection=projection, limit=limit + 1)
        else:
            base = {"snak_mask": Filter.VALUE_SNAK, **self._masks}
            query = self._batch_shapes.bind(lambda es, ps: _around(direction, {**base, "property": ps})(es),
                                            keys, projection=Projection.ALL, limit=limit + 1)
        if query is None:
            return list(await asyncio.gather(*(_outcome(self._single(group, k)) for k in keys)))
        alone = len(keys) == 1
        try:
            rows = await self._guard.run(_SINGLE_KINDS[kind] if alone else kind, lambda: self._select_batch(query))
        except KBError as err:
            if alone:
                return [err]
            rows = None
        if rows is None or len(rows) > limit:  # failed, or cut at the batch's cap: halve it
            if alone:
                return [await _outcome(self._single(group, keys[0]))]
            half = len(keys) // 2
            first, second = await asyncio.gather(self._run_batch(group, keys[:half], halved=True),
                                                 self._run_batch(group, keys[half:], halved=True))
            return first + second
        name = "" if alone else f"batch {hashlib.sha1(query.query.encode()).hexdigest()[:12]} of {len(keys)} lookups"
        found: dict[tuple[Any, Any], list[Any]] = {}
        for row in rows:
            entity = row.subject if direction == "forward" else row.value
            if kind == "properties_of":
                found.setdefault((entity, ""), []).append(self._property(row.property, row.datatype))
            else:
                found.setdefault((entity, row.property), []).append(row)
        results: list[Any] = []
        for e, p in keys:
            mine = found.get((e.iri.content, p.iri.content if p is not None else ""), [])
            if kind == "properties_of":
                properties = list(dict.fromkeys(mine))
                results.append((properties, False) if len(properties) <= limit
                               else await _outcome(self._single(group, (e, p))))
            else:
                results.append((mine, name) if len(mine) <= limit else await _outcome(self._single(group, (e, p))))
        return results

    async def _single(self, group: _Group, key: _Key) -> Any:
        """One lookup alone, as the unbatched path runs it."""
        kind, direction, _ = group
        e, p = key
        limit = self.settings.max_results
        if kind == "properties_of":
            real = {"property_mask": Filter.PropertyMask.REAL, "snak_mask": Filter.VALUE_SNAK, **self._masks}
            return await self._distinct_properties(_around(direction, real), e)
        assert self._shapes is not None and p is not None
        make = _around(direction, {"property": p, "snak_mask": Filter.VALUE_SNAK, **self._masks})
        bound = self._shapes.bind(make, e, projection=Projection.ALL, limit=limit + 1, distinct=True)
        return [row_of(s) for s in await self._guard.run("filter", lambda: self._select(bound))], ""

    async def _named_batch(self, _: str, wanted: list[frozenset[str]]) -> list[frozenset[str] | BaseException]:
        """Those found of each caller's spellings: callers gathered into queries of about :data:`NAME_BATCH`
        spellings; a query that fails is asked again per caller (the error is its own)."""
        chunks: list[list[int]] = [[]]
        size = 0
        for i, mine in enumerate(wanted):
            if chunks[-1] and size + len(mine) > NAME_BATCH:
                chunks.append([])
                size = 0
            chunks[-1].append(i)
            size += len(mine)
        results: list[frozenset[str] | BaseException] = [frozenset()] * len(wanted)

        async def ask(chunk: list[int]) -> None:
            try:
                found = await self._found_names(frozenset().union(*(wanted[i] for i in chunk)),
                                                kind="named" if len(chunk) == 1 else "named batch")
            except KBError as err:
                if len(chunk) == 1:
                    results[chunk[0]] = err
                else:
                    await asyncio.gather(*(ask([i]) for i in chunk))
                return
            for i in chunk:
                results[i] = found & wanted[i]

        await asyncio.gather(*(ask(chunk) for chunk in chunks))
        return results

    async def _found_names(self, spellings: frozenset[str], *, kind: str = "named") -> frozenset[str]:
        """Those of ``spellings`` that are an item's English label or alias in the store (one query), of an item the
        search can find."""
        shape = self._name_shape
        assert shape is not None
        names = sorted(spellings)
        result = await self._guard.run(kind, lambda: shape.store.backend.aselect(
            shape.bind(names), self.settings.timeout_s))
        pairs = shape.read(result)
        if len(pairs) >= shape.limit(names):
            raise KBError(f"{len(pairs)} rows for {len(names)} names reach the query's limit: the result may be cut")
        within = self._found_items
        return frozenset(name for iri, name in pairs if within is None or iri.startswith(within)) & spellings

    async def _any_word_select(self, core: _CoreSPARQL_Store, query: str) -> SPARQL_Results:
        """``query`` (of the any-word search) on ``core``'s backend, as every query of the store goes."""
        return await self._guard.run("search_any_words", lambda: core.backend.aselect(query, self.settings.timeout_s))

    def _typed_property(self, id: str) -> Property:
        """:func:`typed_property` of ``id``, remembered (building it costs ~0.4 ms)."""
        if id not in self._typed:
            self._typed[id] = typed_property(id, self.index)
        return self._typed[id]

    def _property(self, iri: str | None, datatype: Datatype | None) -> Property:
        """The KIF property of a row (one object per property and datatype: building one costs ~40 µs)."""
        assert iri is not None  # the query asks for the property
        key = (iri, datatype)
        if key not in self._properties:
            self._properties[key] = Property(iri, datatype)
        return self._properties[key]

    async def _select_batch(self, query: BatchQuery) -> list[Row]:
        assert self._batch_shapes is not None
        return query.read(await self._batch_shapes.store.backend.aselect(query.query, self.settings.timeout_s))

    async def _select(self, bound: BoundQuery) -> list[Any]:
        """Runs a bound shape's queries on the store's SPARQL backend; the terms they give."""
        assert self._shapes is not None
        backend = self._shapes.store.backend
        return bound.read(list(await asyncio.gather(
            *(backend.aselect(q, self.settings.timeout_s) for q in bound.queries))))

    async def _filter(self, f: Filter) -> FilterResult:
        limit = self.settings.max_results
        statements, truncated = await self._statements(f, "filter")
        return await self._labelled([row_of(s) for s in statements], f=f,
                                    sparql=compile_filter(self.store, f, limit=limit + 1), truncated=truncated)

    async def _labelled(self, rows: list[Row], *, f: Filter, sparql: str, truncated: bool,
                        batch: str = "") -> FilterResult:
        names = await self._labels([ids.to_id(x) for row in rows for x in _entities(row)])
        facts = tuple(sorted((_fact(row, names) for row in rows), key=lambda x: (x.subject, x.property, x.value)))
        return FilterResult(facts=facts, filter=repr(f), sparql=sparql, truncated=truncated, batch=batch)

    async def _statements(self, f: Filter, kind: str) -> tuple[list[Statement], bool]:
        """The statements of ``f``, at most ``max_results``, and whether there were more."""
        limit = self.settings.max_results
        found = await self._guard.run(kind, lambda: _collect(self.store.afilter(
            filter=f, annotated=False, limit=limit + 1, page_size=limit + 1, timeout=self.settings.timeout_s)))
        return found[:limit], len(found) > limit

    async def _labels(self, wanted: Iterable[str]) -> dict[str, str]:
        wanted = list(dict.fromkeys(wanted))
        if self.index is not None:
            return self.index.labels(wanted)
        self.stats.cache_hits += sum(id in self._label_cache for id in wanted)
        missing = [ids.entity(id) for id in wanted if id not in self._label_cache]
        for id, texts in (await self._kif_texts(missing, (LabelProperty(),))).items():
            self._label_cache[id] = texts["label"]
        return {id: self._label_cache[id] for id in wanted if self._label_cache.get(id)}

    async def _describe(self, properties: list[Property]) -> dict[str, Candidate]:
        """Labelled candidates of ``properties`` (bare ids where nothing is known)."""
        known = await self._described(properties)
        return {id: known.get(id) or Candidate(id=id, label=id) for id in map(ids.to_id, properties)}

    async def _described(self, entities: Sequence[Entity]) -> dict[str, Candidate]:
        """Candidates of those ``entities`` the base knows, with their English label, aliases and description."""
        keys = [ids.to_id(e) for e in entities]
        if self.index is not None:
            return {id: Candidate(id=id, label=e.label, aliases=e.aliases, description=e.description)
                    for id, e in self.index.entries(keys).items()}
        # properties asked without their datatypes: KIF's DBpedia mapping describes no property of a given datatype
        untyped = [Property(e.iri) if isinstance(e, Property) else e for e in entities]
        texts = await self._kif_texts(untyped, (LabelProperty(), AliasProperty(), DescriptionProperty()))
        return {id: Candidate(id=id, label=spaced(t["label"]), aliases=tuple(sorted(t["aliases"])),
                              description=spaced(t["description"])) for id, t in texts.items()}

    def _value_types(self, properties: list[Property]) -> dict[Property, str]:
        """What each property's values are (:data:`VALUE_TYPES`): from its Wikidata datatype where
        :meth:`_datatypes` knows it, else from the datatype KIF gives the property; ``""`` when neither knows."""
        known = self._datatypes(properties)
        return {p: VALUE_TYPES.get(datatype, "string") if (datatype := known.get(ids.to_id(p)))
                else _RANGE_TYPES.get(type(p.range).__name__, "") for p in properties}

    def _datatypes(self, properties: list[Property]) -> dict[str, str]:
        """The Wikidata datatype of each property the label index knows, by id."""
        entries = self.index.entries(ids.to_id(p) for p in properties) if self.index is not None else {}
        return {id: e.datatype for id, e in entries.items() if e.datatype}

    async def _kif_texts(self, entities: Sequence[Entity], kinds: tuple[Property, ...]) -> dict[str, dict[str, Any]]:
        """English label, aliases and description of ``entities``, asked from the store."""
        batches = [entities[i:i + LABEL_BATCH] for i in range(0, len(entities), LABEL_BATCH)]
        results = await asyncio.gather(*(self._statements(Filter(
            subject=OrFingerprint(*batch), property=OrFingerprint(*kinds), language="en",
            snak_mask=Filter.VALUE_SNAK), "labels") for batch in batches))
        texts: dict[str, dict[str, Any]] = {ids.to_id(e): {"label": "", "aliases": set(), "description": ""}
                                            for e in entities}
        for statements, _ in results:
            for s in statements:
                snak: Any = s.snak  # a value snak of a text (the filter's masks)
                entry, (prop, value) = texts[ids.to_id(s.subject)], (snak.property, snak.value)
                if isinstance(prop, LabelProperty):
                    entry["label"] = value.content
                elif isinstance(prop, AliasProperty):
                    entry["aliases"].add(value.content)
                elif isinstance(prop, DescriptionProperty):
                    entry["description"] = value.content
        return texts


#: KIF's datatype mask of each Wikidata datatype (KIF reads the types it does not model as strings).
_DATATYPE_MASKS = {
    "wikibase-item": Filter.ITEM,
    "wikibase-property": Filter.PROPERTY,
    "wikibase-lexeme": Filter.LEXEME,
    "url": Filter.IRI,
    "monolingualtext": Filter.TEXT,
    "external-id": Filter.EXTERNAL_ID,
    "quantity": Filter.QUANTITY,
    "time": Filter.TIME,
}


#: The value type (:attr:`~kifqa.types.Fact.value_type`) of each Wikidata datatype; others hold strings.
VALUE_TYPES = {
    "wikibase-item": "item",
    "wikibase-property": "property",
    "wikibase-lexeme": "iri",
    "url": "iri",
    "monolingualtext": "text",
    "external-id": "external_id",
    "quantity": "quantity",
    "time": "time",
}

#: The value type of each KIF datatype class (a property's ``range``, where KIF knows it).
_RANGE_TYPES = {
    "ItemDatatype": "item", "PropertyDatatype": "property", "LexemeDatatype": "iri", "IRI_Datatype": "iri",
    "TextDatatype": "text", "StringDatatype": "string", "ExternalIdDatatype": "external_id",
    "QuantityDatatype": "quantity", "TimeDatatype": "time",
}


def typed_property(id: str, index: LabelIndex | None) -> Property:
    """The property of ``id``, with its datatype when ``index`` knows it (KIF then compiles one query
    branch instead of one per datatype)."""
    prop = ids.property(id)
    entry = index.entries([ids.to_id(prop)]).get(ids.to_id(prop)) if index is not None else None
    return Property(prop.iri, Datatype.check(entry.datatype)) if entry and entry.datatype else prop


def masks(index: LabelIndex) -> Masks:
    """Subject and value masks covering just what the indexed base holds: they spare KIF's compiler
    (and Oxigraph) the query branches of absent datatypes."""
    value_mask = Filter.DatatypeMask(0)
    for datatype in index.value_datatypes():
        value_mask |= _DATATYPE_MASKS.get(datatype, Filter.STRING)
    subject_mask = Filter.DatatypeMask(0)
    for kind in index.subject_kinds():
        subject_mask |= Filter.PROPERTY if kind == "property" else Filter.ITEM
    return {"subject_mask": subject_mask, "value_mask": value_mask}


def _around(direction: Direction, given: dict[str, Any]) -> Callable[[Any], Filter]:
    """The filter of the statements (with the ``given`` filter arguments) ``direction``-wards around an entity, or an
    OR of entities: those it is the subject of (forward) or the value of (backward)."""
    if direction == "forward":
        return lambda x: Filter(subject=x, **given)
    return lambda x: Filter(value=x, **given)


async def _outcome(coro: Coroutine[Any, Any, T]) -> T | BaseException:
    """The result of ``coro``, or the error it raised as a :class:`KBError` (a batch answers each caller
    apart: whatever one lookup raises, KIF's own exceptions included, is that lookup's alone)."""
    try:
        return await coro
    except KBError as err:
        return err
    except Exception as err:
        failed = KBError(redact(f"{type(err).__name__}: {err}"))
        failed.__cause__ = err
        return failed


def _uncarried(key: _Key) -> KBError | None:
    """The error of a lookup whose entity or property has an IRI no SPARQL query can carry; ``None`` if
    both can be carried."""
    for x in key:
        if x is not None and not is_sparql_iri(x.iri.content):
            return KBError(f"not an IRI a SPARQL query can carry: {x.iri.content!r} (it has a space, a control "
                           "character or one of <>\"{}|^`\\)")
    return None


def _id_order(id: str) -> tuple[int, str]:
    """Wikidata ids in numeric order (P19 before P106), other ids after them by text."""
    return (int(id[1:]), "") if ids.is_wikidata_id(id) else (1 << 62, id)


async def _collect(it: AsyncIterator[T]) -> list[T]:
    return [x async for x in it]


def _scored(text: str, hits: list[Candidate]) -> list[Candidate]:
    """``hits`` in the search's order, scored and sorted: 3 for a label that is ``text`` (:func:`index_key`), 2 for
    an alias, else 1; plus up to 0.9 for the search's rank."""
    key, n = index_key(text), len(hits)
    found = []
    for rank, c in enumerate(hits):
        tier = 3.0 if index_key(c.label) == key else 2.0 if key in map(index_key, c.aliases) else 1.0
        found.append(Candidate(id=c.id, label=c.label, aliases=c.aliases, description=c.description,
                               score=tier + 0.9 * (n - rank) / n))
    return sorted(found, key=lambda c: -c.score)


def _names(text: str, hits: list[Candidate]) -> bool:
    """Whether one of ``hits`` has a label or alias that is ``text`` as a question types it (:func:`typed_key`)."""
    key = typed_key(text)
    return any(typed_key(name) == key for c in hits for name in (c.label, *c.aliases))


def _parts(text: str) -> list[str]:
    """The runs of ``text``'s words that a draft's span may hold a name in: without its first or its last words,
    those of more words (as a question types them) first, then those without last words ("single-player mode
    game": "single-player" before "game"; "was born in slovenj gradec": "slovenj gradec")."""
    words = text.split()
    runs = [" ".join(words[:i]) for i in range(len(words) - 1, 0, -1)] + \
        [" ".join(words[i:]) for i in range(1, len(words))]
    return sorted(runs, key=lambda run: -len(typed_key(run).split()))


def _starts(part: str, hit: Candidate) -> bool:
    """Whether ``hit`` is named ``part`` (as a question types it), or, for a part of two words or more, has a name
    that starts with it ("single player" of "single-player video game")."""
    key = typed_key(part)
    names = [typed_key(name) for name in (hit.label, *hit.aliases)]
    return key in names or (len(key.split()) > 1 and any(name.startswith(key + " ") for name in names))


def _stores(store: Store) -> list[Store]:
    """``store`` and, for a mixer, every store under it (a mixer does not close its sources)."""
    if isinstance(store, MixerStore):
        return [store, *(s for source in store.sources for s in _stores(source))]
    return [store]


def _candidate(entity: Entity, desc: Mapping[str, Any]) -> Candidate:
    label = desc.get("labels", {}).get("en")
    description = desc.get("descriptions", {}).get("en")
    aliases = sorted(a.content for a in desc.get("aliases", {}).get("en", ()))
    return Candidate(id=ids.to_id(entity), label=label.content if label else "", aliases=tuple(aliases),
                     description=description.content if description else "")


def _entities(row: Row) -> list[str]:
    """The IRIs of a statement's subject, property and entity value."""
    assert row.subject is not None and row.property is not None
    return [row.subject, row.property, *([row.value] if isinstance(row.value, str) else [])]


def _fact(row: Row, labels: dict[str, str]) -> Fact:
    assert row.subject is not None and row.property is not None and row.value is not None
    subject, prop = ids.to_id(row.subject), ids.to_id(row.property)
    value, value_type, value_label = _value(row.value, row.datatype, labels)
    return Fact(subject=subject, subject_label=labels.get(subject, subject), property=prop,
                property_label=labels.get(prop, prop), value=value, value_label=value_label, value_type=value_type)


def _value(v: str | Value, datatype: Datatype | None, labels: dict[str, str]) -> tuple[str, str, str]:
    """The (value, value_type, value_label) of a row's value: an entity's IRI (its kind the ``datatype``'s),
    or a KIF value."""
    if isinstance(v, str):
        id = ids.to_id(v)
        kind = ("item" if isinstance(datatype, ItemDatatype) else "property" if isinstance(datatype, PropertyDatatype)
                else "iri")
        return id, kind, labels.get(id, id)
    if isinstance(v, IRI):
        return v.content, "iri", v.content
    if isinstance(v, ExternalId):
        return v.content, "external_id", v.content
    if isinstance(v, String):
        return v.content, "string", v.content
    if isinstance(v, Text):
        return v.content, "text", v.content
    if isinstance(v, Quantity):
        amount = str(v.amount)
        unit = ids.to_id(v.unit) if v.unit is not None and ids.to_id(v.unit) != "Q199" else ""
        return amount, "quantity", f"{amount} {labels.get(unit, unit)}".strip()
    if isinstance(v, Time):
        return v.time.isoformat(), "time", v.time.date().isoformat()
    raise KBError(f"unexpected KIF value {v!r}")
