"""The KB actors' on-disk result cache: JSON rows (a planted pickle runs nothing), a private folder, keys on
the build's hash (changed data is never served stale), and a cache that cannot be written or read never
turns a good KB answer into an error. Real SQLite files and real knowledge bases built from tiny data."""

from __future__ import annotations

import asyncio
import json
import pickle
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kifqa.batch.kbcache import MISS, KBCache, encode
from kifqa.batch.kbpool import _CALLS, _namespace
from kifqa.config import Settings
from kifqa.data import paths
from kifqa.kb.base import Hits
from kifqa.kb.build import build
from kifqa.kb.spec import open_kb
from kifqa.types import Candidate

Maker = Callable[..., Settings]


class _Planted:
    """Unpickling this creates ``path``: what a planted pickle could do, harmlessly."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


def _answer(cache: KBCache, kb: Any, call: str, *args: Any) -> tuple[Any, bool]:
    async def run() -> tuple[Any, bool]:
        return await cache.answer(call, args, {}, lambda: getattr(kb, call)(*args))
    return asyncio.run(run())


def test_every_call_result_round_trips_as_json(tiny_settings: Maker, tmp_path: Path) -> None:
    settings = tiny_settings()
    build(settings)
    kb = open_kb("local", settings)
    cache = KBCache(tmp_path / "cache", _namespace(settings, kb))
    try:
        calls = [("search_entities", ("alpha",)), ("search_properties", ("located",)), ("properties_of", ("Q1",)),
                 ("facts", ("Q1", "P10", "forward")), ("labels", (["Q1", "Q2"],)), ("named", (["alpha", "zqxv"],))]
        assert {call for call, _ in calls} == _CALLS, "every call a KB actor serves is cached"
        for call, args in calls:
            fresh, hit = _answer(cache, kb, call, *args)
            again, hit_again = _answer(cache, kb, call, *args)
            assert (hit, hit_again) == (False, True) and again == fresh, call
        rows = [v for (v,) in sqlite3.connect(cache.path).execute("SELECT value FROM results")]
        assert len(rows) == len(calls) and all(json.loads(v) is not None for v in rows)  # data only, no pickles
    finally:
        cache.close()
        asyncio.run(kb.aclose())


def test_a_planted_pickle_runs_nothing(tmp_path: Path) -> None:
    cache = KBCache(tmp_path / "cache", "ns")
    key = cache.key("labels", (["Q1"],), {})
    witness = tmp_path / "pwned"
    with sqlite3.connect(cache.path) as db:
        db.execute("INSERT INTO results VALUES (?, ?)", (key, pickle.dumps(_Planted(witness))))
    assert asyncio.run(cache.get("labels", key)) is MISS
    assert not witness.exists()
    cache.close()


def test_a_search_that_failed_on_the_way_is_not_stored(tmp_path: Path) -> None:
    """A search whose fallback failed (counted as no hit) is asked again next time; one that did not is stored."""
    cache = KBCache(tmp_path / "cache", "ns")
    degraded, whole = Hits([Candidate(id="Q1", label="a")], failed=["the full-text search failed"]), Hits()

    async def twice(value: Hits) -> list[bool]:
        return [(await cache.answer("search_entities", (str(id(value)),), {}, lambda: _ready(value)))[1]
                for _ in range(2)]
    assert asyncio.run(twice(degraded)) == [False, False]
    assert asyncio.run(twice(whole)) == [False, True]
    cache.close()


async def _ready(value: Any) -> Any:
    return value


def test_the_cache_folder_is_private(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    KBCache(folder, "ns").close()
    assert folder.stat().st_mode & 0o777 == 0o700


def test_changed_data_in_the_same_folder_is_never_served_stale(tiny_settings: Maker, tiny_data: dict[str, Any],
                                                               tmp_path: Path) -> None:
    settings = tiny_settings()

    def search() -> tuple[list[str], bool]:
        build(settings)
        kb = open_kb("local", settings)
        cache = KBCache(tmp_path / "cache", _namespace(settings, kb))
        try:
            found, hit = _answer(cache, kb, "search_entities", "gamma")
            return [c.label for c in found], hit
        finally:
            cache.close()
            asyncio.run(kb.aclose())

    assert search() == (["Gamma"], False)
    assert search() == (["Gamma"], True)
    tiny_data["items"]["Q4"] = ["Gamma Crucis", "Gamma"]  # the same data folder, new content
    (settings.data_dir / paths.ITEM_LABELS).write_text(json.dumps(tiny_data["items"]))
    assert search() == (["Gamma Crucis"], False)


def test_a_locked_cache_never_turns_a_good_answer_into_an_error(tiny_settings: Maker, tmp_path: Path) -> None:
    settings = tiny_settings()
    build(settings)
    kb = open_kb("local", settings)
    cache = KBCache(tmp_path / "cache", _namespace(settings, kb), busy_timeout_s=0.01)
    other = sqlite3.connect(cache.path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process holds the write lock throughout
    try:
        found, hit = _answer(cache, kb, "search_entities", "gamma")
        assert [c.id for c in found] == ["Q4"] and not hit
        assert asyncio.run(cache.put("k", {"Q1": "x"})) is False
    finally:
        other.execute("ROLLBACK")
        other.close()
        cache.close()
        asyncio.run(kb.aclose())


def test_only_kb_results_are_encoded() -> None:
    with pytest.raises(TypeError, match="cannot cache a object"):
        encode(object())
