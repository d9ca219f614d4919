"""Compact ids: ``Q42``/``P19``/``L7`` for Wikidata entities, the full IRI for anything else."""

from __future__ import annotations

import re

from kif_lib import IRI, Item, Lexeme, Property
from kif_lib.model import Entity

from kifqa.errors import KBError

#: Wikidata's entity namespace.
WD = "http://www.wikidata.org/entity/"

_WIKIDATA_ID = re.compile(r"[QPL][1-9][0-9]*")
_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")


def is_wikidata_id(id: str) -> bool:
    """Whether ``id`` is a compact Wikidata id (``Q42``, ``P19``, ``L7``)."""
    return _WIKIDATA_ID.fullmatch(id) is not None


def to_id(entity: Entity | IRI | str) -> str:
    """The compact id of a KIF entity, IRI object or IRI string."""
    if isinstance(entity, Entity):
        iri = entity.iri.content
    elif isinstance(entity, IRI):
        iri = entity.content
    else:
        iri = entity
    if iri.startswith(WD) and is_wikidata_id(iri[len(WD):]):
        return iri[len(WD):]
    return iri


def to_iri(id: str) -> str:
    """The full IRI of a compact id; a full IRI is returned as is."""
    id = id.strip()
    if is_wikidata_id(id):
        return WD + id
    if _IRI.fullmatch(id):
        return id
    raise KBError(f"not an entity id: {id!r} (expected Q42, P19 or a full IRI)")


def entity(id: str) -> Item | Property | Lexeme:
    """The KIF entity of an id: ``P``-ids are properties, ``L``-ids lexemes, the rest items."""
    iri = to_iri(id)
    compact = to_id(iri)
    if compact.startswith("P") and is_wikidata_id(compact):
        return Property(iri)
    if compact.startswith("L") and is_wikidata_id(compact):
        return Lexeme(iri)
    return Item(iri)


def property(id: str) -> Property:
    """The KIF property of an id."""
    return Property(to_iri(id))
