"""Search and entity linking compare names by one rule (case and accents ignored): a name the search
ranks as an exact match is the name linking keeps as exact, on a base built from tiny data."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from kifqa.config import Settings
from kifqa.kb.build import build
from kifqa.kb.spec import open_kb
from kifqa.pipeline.entities import link


@pytest.mark.parametrize("label", ["beyonce", "BEYONCÉ", "Beyoncé", "beyoncé"])
def test_an_exact_search_match_is_an_exact_link(label: str, tiny_settings: Callable[..., Settings]) -> None:
    settings = tiny_settings()
    build(settings)
    kb = open_kb("local", settings)
    try:
        [first, *_] = asyncio.run(kb.search_entities(label))
        linking = asyncio.run(link(kb, label))
    finally:
        asyncio.run(kb.aclose())
    assert first.id == "Q2" and first.score >= 3.0, "the search ranks it an exact label match"
    assert linking.exact and [c.id for c in linking.kept] == ["Q2"], "and linking keeps it as exactly named"
