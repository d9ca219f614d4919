"""Batch results read without KIF objects (:class:`~kifqa.kb.sparql.RowReader`'s recipes) give what KIF's own
result builder gives: the same properties and facts, on a real base holding item, identifier, quantity, time
and IRI values; rows of literals, and mappings that change IRIs, are read by KIF."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kif_lib.compiler.sparql.mapping.dbpedia import DBpediaMapping
from kif_lib.compiler.sparql.mapping.wikidata import WikidataMapping

from kifqa.config import Settings
from kifqa.kb import sparql
from kifqa.kb.build import build
from kifqa.kb.spec import open_kb

ENTITIES = ["Q1", "Q2", "Q3", "Q5"]
PROPERTIES = ["P10", "P11", "P12", "P13", "P14"]


async def everything(settings: Settings) -> tuple[list[Any], list[Any]]:
    """Every entity's properties and every (entity, property, direction)'s facts, asked all at once (so that
    they are coalesced into batch queries)."""
    kb = open_kb("local", settings)
    try:
        uses = await asyncio.gather(*(kb.properties_of(e) for e in ENTITIES))
        facts = await asyncio.gather(*(kb.facts(e, p, d) for e in ENTITIES for p in PROPERTIES
                                       for d in ("forward", "backward")))
        assert kb.batching[0] < kb.batching[1], "the lookups were coalesced"
        return uses, [(f.facts, f.truncated) for f in facts]
    finally:
        await kb.aclose()


def test_rows_read_by_recipe_are_what_kif_reads(tiny_settings: Callable[..., Settings], tiny_data: dict[str, Any],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    tiny_data["triples"] += [("Q2", "P11", "HIP 1"), ("Q2", "P12", "3"), ("Q2", "P13", "1881-09-04"),
                             ("Q2", "P14", "https://example.org/beta"), ("Q3", "P10", "Q5")]
    settings = tiny_settings(tiny_data)
    build(settings)
    made: list[sparql.Row] = []  # rows KIF's result builder read
    read: list[sparql.Row] = []  # every row the readers gave
    row_of, reader_read = sparql.row_of, sparql.RowReader.read

    def kif_row(statement: Any) -> sparql.Row:
        made.append(row_of(statement))
        return made[-1]

    def rows(reader: sparql.RowReader, result: Any) -> list[sparql.Row]:
        read.extend(reader_read(reader, result))
        return read[len(read) - len(result["results"]["bindings"]):]

    monkeypatch.setattr(sparql, "row_of", kif_row)
    monkeypatch.setattr(sparql.RowReader, "read", rows)
    fast = asyncio.run(everything(settings))
    assert read and len(made) < len(read), "some rows were read by a recipe, without KIF's result builder"
    assert {type(r.value).__name__ for r in read} >= {"str", "NoneType", "ExternalId", "Quantity", "Time", "IRI"}
    assert {type(r.value).__name__ for r in made} >= {"ExternalId", "Quantity", "Time", "IRI"}, (
        "literal and IRI values are left to KIF")

    monkeypatch.setattr(sparql, "_checks_no_iri", lambda mapping: False)
    made.clear()
    read.clear()
    assert asyncio.run(everything(settings)) == fast
    assert len(made) == len(read) > 0, "without recipes, KIF reads every row"


def test_recipes_only_where_the_mapping_reads_iris_as_they_are() -> None:
    class Renaming(WikidataMapping):
        _repl_item_uri = {"http://www.wikidata.org/entity/Q1": "http://www.wikidata.org/entity/Q2"}

    assert sparql._checks_no_iri(WikidataMapping())
    assert not sparql._checks_no_iri(WikidataMapping(strict=True))
    assert not sparql._checks_no_iri(Renaming())
    assert not sparql._checks_no_iri(DBpediaMapping())
