"""KIF entities of kifqa's ids (:mod:`kifqa.data.ids`: ``Q42``/``P19``/``L7``, the full IRI for anything else)."""

from __future__ import annotations

from kif_lib import IRI, Item, Lexeme, Property
from kif_lib.model import Entity

from kifqa.data.ids import compact, expand, is_wikidata_id
from kifqa.errors import KBError


def to_id(entity: Entity | IRI | str) -> str:
    """The compact id of a KIF entity, IRI object or IRI string."""
    if isinstance(entity, Entity):
        return compact(entity.iri.content)
    return compact(entity.content if isinstance(entity, IRI) else entity)


def to_iri(id: str) -> str:
    """The full IRI of a compact id; a full IRI is returned as is."""
    iri = expand(id)
    if iri is None:
        raise KBError(f"not an entity id: {id!r} (expected Q42, P19 or a full IRI "
                      "without spaces, control characters or any of <>\"{}|^`\\)")
    return iri


def entity(id: str) -> Item | Property | Lexeme:
    """The KIF entity of an id: ``P``-ids are properties, ``L``-ids lexemes, the rest items."""
    iri = to_iri(id)
    compact_id = to_id(iri)
    if compact_id.startswith("P") and is_wikidata_id(compact_id):
        return Property(iri)
    if compact_id.startswith("L") and is_wikidata_id(compact_id):
        return Lexeme(iri)
    return Item(iri)


def property(id: str) -> Property:
    """The KIF property of an id."""
    return Property(to_iri(id))
