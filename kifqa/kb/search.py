"""KIF search plugins ``kifqa-local`` and ``kifqa-dbpedia``: items and properties by label and alias over the
label index of a build.

Ranking is :mod:`kifqa.kb.index`'s: every exact label match (ignoring case and accents), then exact alias matches,
then token/prefix matches. Exact matches are never cut by ``limit``; a ``None`` limit means the page
size. Both KIF's sync and async entry points are implemented (KIF's default async search is empty).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from kif_lib import Datatype, Item, Property, Search, Text
from kif_lib.search.abc import SearchOptions
from kif_lib.typing import Location

from kifqa.errors import KBError
from kifqa.kb import ids
from kifqa.kb.index import Kind, LabelIndex

#: Longest search text accepted, in characters.
MAX_QUERY_CHARS = 500

T = TypeVar("T")
Data = dict[str, Any]


def check_query(text: Any) -> str:
    """``text`` if it is a usable search text; a :class:`KBError` saying why not otherwise."""
    if not isinstance(text, str):
        raise KBError(f"search text must be a string, not {type(text).__name__}")
    if not text.strip():
        raise KBError("search text is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise KBError(f"search text is {len(text)} characters long; at most {MAX_QUERY_CHARS} are accepted")
    return text


class LocalSearch(Search, search_name="kifqa-local", search_description="Label/alias search over kifqa's label index"):
    """Search over a :class:`~kifqa.kb.index.LabelIndex` (given, or opened from its path).

    Args:
        search_name: Name of the search plugin to instantiate.
        index: The label index, or the path of its file.
        kwargs: Other search options (``limit``, ``page_size``...).
    """

    def __init__(self, search_name: str, index: LabelIndex | str | Path, **kwargs: Any) -> None:
        self._index = index if isinstance(index, LabelIndex) else LabelIndex(Path(index))
        super().__init__(search_name, **kwargs)

    @property
    def index(self) -> LabelIndex:
        return self._index

    def _check_search(self, search: str, function: Location | None = None) -> str:
        return check_query(search)

    def _search_x_tail(self, search_x_fn: Callable[[str, SearchOptions], Iterator[T]], search: str,
                       options: SearchOptions) -> Iterator[T]:
        return search_x_fn(search, options)  # the index applies the limit (exact matches are never cut)

    def _asearch_x_tail(self, asearch_x_fn: Callable[[str, SearchOptions], AsyncIterator[T]], search: str,
                        options: SearchOptions) -> AsyncIterator[T]:
        return asearch_x_fn(search, options)

    def _hits(self, kind: Kind, search: str, options: SearchOptions) -> list[Data]:
        if options.language not in (None, "en"):
            return []  # the index is English only
        limit = options.limit if options.limit is not None else options.page_size
        return [{"id": h.entry.id, "label": h.entry.label, "aliases": list(h.entry.aliases),
                 "description": h.entry.description, "datatype": h.entry.datatype, "score": h.score,
                 "match": h.match} for h in self._index.search(kind, search, limit)]

    async def _ahits(self, kind: Kind, search: str, options: SearchOptions) -> AsyncIterator[Data]:
        # In the calling thread: an index lookup takes less than the hop to a worker thread and back.
        for data in self._hits(kind, search, options):
            yield data

    def _item_data(self, search: str, options: SearchOptions) -> Iterator[Data]:
        return iter(self._hits("item", search, options))

    def _aitem_data(self, search: str, options: SearchOptions) -> AsyncIterator[Data]:
        return self._ahits("item", search, options)

    def _property_data(self, search: str, options: SearchOptions) -> Iterator[Data]:
        return iter(self._hits("property", search, options))

    def _aproperty_data(self, search: str, options: SearchOptions) -> AsyncIterator[Data]:
        return self._ahits("property", search, options)

    def _to_item(self, data: Data) -> Item:
        return Item(ids.to_iri(data["id"]))

    def _to_item_descriptor(self, data: Data) -> tuple[Item, Item.Descriptor]:
        return self._to_item(data), _descriptor(data)

    def _to_property(self, data: Data) -> Property:
        return Property(ids.to_iri(data["id"]), Datatype.check(data["datatype"]) if data["datatype"] else None)

    def _to_property_descriptor(self, data: Data) -> tuple[Property, Property.Descriptor]:
        prop = self._to_property(data)
        return prop, {**_descriptor(data), "range": prop.range}  # type: ignore[typeddict-item]  # None: no datatype


class DBpediaSearch(LocalSearch, search_name="kifqa-dbpedia",
                    search_description="DBpedia-Lookup-style search of the DBpedia-encoded base: resources by "
                                       "label, ontology properties by label and comment"):
    """:class:`LocalSearch` over the label index of the DBpedia-encoded build (:mod:`kifqa.kb.dbpedia`)."""


def _descriptor(data: Data) -> Item.Descriptor:
    desc: Item.Descriptor = {}
    if data["label"]:
        desc["labels"] = {"en": Text(data["label"], "en")}
    if data["aliases"]:
        desc["aliases"] = {"en": {Text(a, "en") for a in data["aliases"]}}
    if data["description"]:
        desc["descriptions"] = {"en": Text(data["description"], "en")}
    return desc
