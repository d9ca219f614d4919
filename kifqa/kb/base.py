"""The knowledge-base interface the pipeline talks to, in plain data types.

Everything the pipeline needs from a knowledge base goes through :class:`KnowledgeBase`: the
in-process implementation wraps a KIF (Store, Search) pair; the batch layer hands the pipeline an
actor-backed implementation of the same interface. Ids are compact strings: Wikidata entities as
``Q42``/``P19``, everything else as its full IRI (see :mod:`kifqa.kb.ids`).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kifqa.errors import KBError
from kifqa.types import Candidate, Direction, Fact


@dataclass(frozen=True, kw_only=True)
class PropertyUse:
    """A property an entity really has, and in which direction."""

    property: Candidate
    direction: Direction
    #: What its values are (:attr:`kifqa.types.Fact.value_type`: ``item``, ``time``, ``quantity``,
    #: ``external_id``, ...), ``""`` when the knowledge base does not say.
    value_type: str = ""


@dataclass(frozen=True, kw_only=True)
class EntityProperties:
    """The distinct properties one entity has, both ways."""

    uses: tuple[PropertyUse, ...]
    #: True when a direction had more than ``max_results`` distinct properties (the rest are left out).
    truncated: bool = False


@dataclass(frozen=True, kw_only=True)
class FilterResult:
    """The statements one KIF filter returned, with the filter and the SPARQL it compiled to."""

    facts: tuple[Fact, ...]
    filter: str
    sparql: str = ""
    #: True when the store may have cut the result short (e.g. an endpoint row limit).
    truncated: bool = False
    #: The batch query that answered it with other lookups (its SPARQL's hash and size), or ``""``.
    batch: str = ""


class Hits(list[Candidate]):
    """What a search found, best first, and the searches that failed on the way: each failure counted as no hit
    (a fallback refused, an answer of a changed shape), so that the question goes on with what the others found and
    its trace says what failed (:class:`~kifqa.pipeline.recorder.CountingKB`)."""

    def __init__(self, found: Iterable[Candidate] = (), *, failed: Iterable[str] = ()) -> None:
        super().__init__(found)
        #: Each failed search and its error.
        self.failed = tuple(failed)


@dataclass
class KBStats:
    """Counters of the calls one knowledge base served."""

    calls: int = 0
    retries: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    by_kind: dict[str, int] = field(default_factory=dict)


class KnowledgeBase(abc.ABC):
    """Async access to one knowledge base. Errors surface as :class:`kifqa.errors.KBError`."""

    #: The spec this base was opened from (``local``, ``wikidata``, ``sparql+wikidata:URL``...).
    spec: str
    #: The hash of the local build it reads (:mod:`kifqa.kb.build`), ``None`` for a base without one.
    build: str | None = None

    @abc.abstractmethod
    async def search_entities(self, text: str, *, limit: int = 10) -> list[Candidate]:
        """Entities whose label or alias matches ``text``, best first."""

    @abc.abstractmethod
    async def search_properties(self, text: str, *, limit: int = 10) -> list[Candidate]:
        """Properties whose label, alias or description matches ``text``, best first."""

    @abc.abstractmethod
    async def properties_of(self, entity: str) -> EntityProperties:
        """The distinct properties ``entity`` has as subject (forward) and as value (backward), labelled."""

    @abc.abstractmethod
    async def facts(self, entity: str, property: str, direction: Direction) -> FilterResult:
        """The statements ``(entity, property, ?)`` (forward) or ``(?, property, entity)`` (backward)."""

    @abc.abstractmethod
    async def labels(self, ids: list[str]) -> dict[str, str]:
        """English labels of the given entities (missing ones are left out)."""

    async def named(self, texts: list[str]) -> list[str] | None:
        """Those of ``texts`` that are exactly an item's label or alias (case, accents and punctuation
        folded), in the order given; ``None`` when the base cannot tell without a search per text (a base
        without a label index of its own)."""
        return None

    async def select(self, query: str) -> dict[str, Any]:
        """The SPARQL JSON result of a ``SELECT`` ``query`` asked of the base as it is written (a released
        dataset's query executed again); :class:`~kifqa.errors.KBError` for a base that runs no SPARQL."""
        raise KBError(f"{self.spec}: this knowledge base runs no SPARQL query of its own")

    async def aclose(self) -> None:
        """Releases connections and processes."""
