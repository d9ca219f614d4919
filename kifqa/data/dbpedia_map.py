"""The links of the DBpedia-encoded build, as its manifest records them: which ``dbr:`` resource each
Wikidata item became and which ``dbo:`` property each Wikidata property maps to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kifqa.errors import DataError


@dataclass(frozen=True, kw_only=True)
class DBpediaLinks:
    """Wikidata item -> DBpedia resource IRI, and Wikidata property id -> DBpedia ontology property IRI."""

    resources: dict[str, str]
    properties: dict[str, str]


def read_links(manifest: dict[str, Any]) -> DBpediaLinks:
    """The links a DBpedia build's manifest records; :class:`DataError` if it records none."""
    resources, properties = manifest.get("resources"), manifest.get("property_map")
    if not isinstance(resources, dict) or not isinstance(properties, dict):
        raise DataError("the DBpedia build's manifest has no resource and property links; rebuild it with "
                        "`kifqa kb build --encoding dbpedia --force`")
    return DBpediaLinks(resources=resources, properties=properties)
