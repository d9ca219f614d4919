""":class:`PublicKnowledgeBase`: ``--kb wikidata`` at a corpus's scale.

KIF's ``wdqs`` store sends one SPARQL query per filter (an OR of entities compiles to one ``VALUES``, but KIF
has no way to gather the filters of concurrent callers), and its labels are SPARQL too. Here only what needs SPARQL
goes to WDQS: the inverse lookups (an entity's statements as a value: ``properties_of`` and ``facts`` backward),
coalesced across questions into ``VALUES`` queries compiled by KIF (:class:`~kifqa.kb.sparql.BatchShapes`, as
:class:`~kifqa.kb.kifkb.KifKnowledgeBase` batches them). Forward lookups, labels, descriptions and property
datatypes come from the Wikidata API's ``wbgetentities`` (:class:`~kifqa.kb.wbapi.WikibaseEntities`: 50 entities a
request, remembered), through the API's limit as the searches go; only the labels of many items at once (the
subjects of a large inverse lookup) are asked of WDQS, in one query per thousand (:mod:`~kifqa.kb.wdqslabels`).
Search and exact names stay KIF's (``wikidata-wapi``, the store's labels), as on
:class:`~kifqa.kb.kifkb.KifKnowledgeBase`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kif_lib import Filter, Property, Search, Store
from kif_lib.model import Entity

from kifqa.config import KBSettings
from kifqa.data.ids import is_wikidata_id
from kifqa.data.text import spaced
from kifqa.kb import ids
from kifqa.kb.base import FilterResult
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.wbapi import MAX_IDS, WikibaseEntities
from kifqa.kb.wdqslabels import ItemLabels
from kifqa.types import Candidate, Direction

#: Items missing a label past which they are asked of WDQS: one query there (~0.2 s of its 60 s a minute) costs
#: about what two API requests do (of its 10 a second, one at a time).
BULK_LABELS_OVER = 2 * MAX_IDS


class PublicKnowledgeBase(KifKnowledgeBase):
    """Wikidata through WDQS (``store``, inverse lookups only) and the Wikidata API at ``api_url`` (``search``,
    forward lookups and terms); see the module doc. ``headers`` go with every API request."""

    def __init__(self, store: Store, search: Search, *, spec: str, settings: KBSettings, api_url: str,
                 headers: dict[str, str], fulltext: Search | None = None) -> None:
        super().__init__(store, search, spec=spec, settings=settings, fulltext=fulltext)
        self.entities = WikibaseEntities(
            api_url, run=lambda kind, call: self._guard.run(kind, call, target="search"), headers=headers,
            timeout_s=settings.timeout_s, maxlag_s=settings.maxlag_s, wait_s=settings.batch_wait_s)
        shapes = self._batch_shapes
        #: Labels of many items from WDQS (the subjects of a large inverse lookup).
        self._item_labels = ItemLabels(shapes, select=lambda query: self._guard.run(
            "labels", lambda: shapes.store.backend.aselect(query, settings.timeout_s))) if shapes else None

    async def facts(self, entity: str, property: str, direction: Direction) -> FilterResult:
        if direction != "forward" or not is_wikidata_id(ids.to_id(ids.to_iri(entity))):
            return await super().facts(entity, property, direction)
        return await self._run(self._forward_facts(ids.entity(entity), self._typed_property(property)))

    async def _forward_facts(self, e: Entity, p: Property) -> FilterResult:
        """``facts`` forward: the entity's statements of ``p`` from its claims."""
        limit = self.settings.max_results
        found = await self.entities.claims([ids.to_id(e)])
        record = found.get(ids.to_id(e))
        rows = [r for r in record.statements or () if r.property == p.iri.content] if record else []
        return await self._labelled(rows[:limit], f=Filter(subject=e, property=p, snak_mask=Filter.VALUE_SNAK),
                                    sparql="", truncated=len(rows) > limit, batch="wbgetentities")

    async def _properties_one_way(self, e: Entity, direction: Direction) -> tuple[list[Property], bool]:
        id = ids.to_id(e)
        if direction != "forward" or not is_wikidata_id(id):
            return await super()._properties_one_way(e, direction)
        record = (await self.entities.claims([id])).get(id)
        found = list(dict.fromkeys(self._property(r.property, r.datatype) for r in
                                   (record.statements or () if record else ())))
        limit = self.settings.max_results
        return found[:limit], len(found) > limit

    async def _labels(self, wanted: Iterable[str]) -> dict[str, str]:
        """Remembered labels; where more than :data:`BULK_LABELS_OVER` items are missing, theirs from WDQS
        (:class:`~kifqa.kb.wdqslabels.ItemLabels`); the rest from the API's terms."""
        asked = [id for id in dict.fromkeys(wanted) if is_wikidata_id(id)]
        known = {id: self._label_cache[id] for id in asked if id in self._label_cache}
        missing = [id for id in asked if id not in known]
        items = [id for id in missing if id.startswith("Q") and self.entities.cached(id) is None]
        if len(items) > BULK_LABELS_OVER and self._item_labels is not None:
            found = await self._item_labels.labels(items)
            if found is not None:
                self._label_cache.update(found)
                known.update(found)
                missing = [id for id in missing if id not in found]
        known.update((id, e.label) for id, e in (await self.entities.terms(missing)).items())
        return {id: label for id, label in known.items() if label}

    async def _described(self, entities: Sequence[Entity]) -> dict[str, Candidate]:
        found = await self.entities.terms(k for e in entities if is_wikidata_id(k := ids.to_id(e)))
        return {id: Candidate(id=id, label=spaced(e.label), aliases=tuple(sorted(set(e.aliases))),
                              description=spaced(e.description)) for id, e in found.items()}

    def _datatypes(self, properties: list[Property]) -> dict[str, str]:
        """From the API's terms of the properties (:meth:`_describe` has just asked them)."""
        known = {id: e.datatype for p in properties if (e := self.entities.cached(id := ids.to_id(p)))}
        return {id: datatype for id, datatype in known.items() if datatype}

    async def _aclose_engines(self) -> None:
        try:
            await super()._aclose_engines()
        finally:
            await self.entities.aclose()
