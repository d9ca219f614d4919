"""What the relation step knows of a property's values, and how the label index ranks names that hold
only some of a text's words, on bases built from tiny data."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kifqa.config import Settings
from kifqa.kb.build import build
from kifqa.kb.spec import open_kb
from kifqa.pipeline import relations
from kifqa.pipeline.entities import Linking
from kifqa.types import Pattern


def test_properties_of_says_what_each_property_holds(tiny_settings: Callable[..., Settings]) -> None:
    settings = tiny_settings()
    build(settings)
    kb = open_kb("local", settings)
    try:
        uses = asyncio.run(kb.properties_of("Q1")).uses
        [alpha] = [c for c in asyncio.run(kb.search_entities("alpha centauri")) if c.id == "Q1"]
    finally:
        asyncio.run(kb.aclose())
    assert {(u.property.id, u.direction): u.value_type for u in uses} == {
        ("P10", "forward"): "item", ("P11", "forward"): "external_id", ("P12", "forward"): "quantity",
        ("P13", "forward"): "time", ("P14", "forward"): "iri", ("P10", "backward"): "item"}
    linking = Linking("alpha centauri", [alpha], [alpha], True)
    ranked = relations.options(Pattern("alpha centauri", "place", "?x"), linking, {"Q1": list(uses)},
                               question="where is alpha centauri")
    assert {(o.property.id, o.direction) for o in ranked} == {("P10", "forward"), ("P10", "backward")}


def test_a_name_with_more_of_the_words_outranks_a_popular_one(tiny_settings: Callable[..., Settings],
                                                               tiny_data: dict[str, Any]) -> None:
    """No name holds all of "wiebke von carolsfeld": the one holding two of its words comes before a far
    more popular one holding one (the hard base's fan-out makes popular items more popular still)."""
    tiny_data["items"].update({"Q20": ["Wiebke Carolsfeld"], "Q21": ["Johann Wolfgang von Goethe"]})
    tiny_data["triples"] += [("Q21", "P10", f"Q{i}") for i in (1, 2, 3, 4, 5)] + [("Q20", "P10", "Q3")]
    settings = tiny_settings(tiny_data)
    build(settings)
    kb = open_kb("local", settings)
    try:
        found = asyncio.run(kb.search_entities("wiebke von carolsfeld", limit=5))
    finally:
        asyncio.run(kb.aclose())
    assert [c.id for c in found[:2]] == ["Q20", "Q21"]
