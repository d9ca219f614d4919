"""Ids as kifqa writes them: ``Q42``/``P19``/``L7`` for Wikidata entities, the full IRI for anything else."""

from __future__ import annotations

import re
from urllib.parse import unquote

#: Wikidata's entity namespace.
WD = "http://www.wikidata.org/entity/"

_WIKIDATA_ID = re.compile(r"[QPL][1-9][0-9]*")
#: An absolute IRI that SPARQL's ``IRIREF`` can carry: a scheme, then no space, control character or any
#: of ``<>"{}|^`\`` (which would end the ``<...>`` or break the query).
_IRI = re.compile(r'[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x20\x7f<>"{}|^`\\]+')


def is_wikidata_id(id: str) -> bool:
    """Whether ``id`` is a compact Wikidata id (``Q42``, ``P19``, ``L7``)."""
    return _WIKIDATA_ID.fullmatch(id) is not None


def is_sparql_iri(iri: str) -> bool:
    """Whether ``iri`` is an absolute IRI a SPARQL query can carry as ``<iri>``."""
    return _IRI.fullmatch(iri) is not None


def compact(iri: str) -> str:
    """The compact id of an IRI: ``Q42`` for Wikidata's entity IRI, the IRI itself otherwise."""
    if iri.startswith(WD) and is_wikidata_id(iri[len(WD):]):
        return iri[len(WD):]
    return iri


def expand(id: str) -> str | None:
    """The full IRI of a compact id (a full IRI as is); ``None`` if ``id`` is neither."""
    id = id.strip()
    if is_wikidata_id(id):
        return WD + id
    return id if is_sparql_iri(id) else None


def canonical_id(x: str) -> str:
    """An id written any way (compact, as an entity IRI, percent-encoded, in angle brackets) as one string."""
    x = unquote(x.strip().removeprefix("<").removesuffix(">"))
    return x.removeprefix(WD)


def same_id(a: str, b: str) -> bool:
    """True when two KB ids name the same thing: compact Wikidata ids and their entity IRIs,
    percent-encoded and plain IRIs, with or without angle brackets."""
    return canonical_id(a) == canonical_id(b)


def iri_name(iri: str) -> str:
    """A readable name from an IRI's local part: ``.../Clyde,_Missouri`` → ``Clyde, Missouri``."""
    local = re.split(r"[/#]", canonical_id(iri).rstrip("/"))[-1]
    return local.replace("_", " ")
