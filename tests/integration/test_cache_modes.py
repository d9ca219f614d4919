"""The caches that hold questions and prompts are this user's alone, like ``kb-cache/`` and ``vectors/``:
the LLM record cache (its folder 0700 when created, its files 0600), the block states ``kv/`` and the
example embeddings ``examples/`` (0700, tightened when found open)."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

from kifqa.examples import open_examples
from kifqa.llm import CachedLLM
from kifqa.llm.blockstate import StateStore
from tests.unit.test_llm_cache import Scripted, ask


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def test_the_llm_record_cache_is_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / "cassette.sqlite"
    recorder = CachedLLM(Scripted(), path=path, mode="record")
    recorder.generate([ask("who wrote dracula")])
    assert mode(path.parent) == "0o700" and mode(path) == "0o600"
    assert mode(path.with_name("cassette.sqlite-wal")) == "0o600"
    asyncio.run(recorder.aclose())
    old = tmp_path / "old.sqlite"
    old.touch(mode=0o644)
    old.chmod(0o644)
    asyncio.run(CachedLLM(Scripted(), path=old, mode="record").aclose())
    assert mode(old) == "0o600", "a record file found open is tightened"


def test_block_states_are_private(tmp_path: Path) -> None:
    assert mode(StateStore(tmp_path / "kv").folder) == "0o700"
    found = tmp_path / "open"
    found.mkdir(mode=0o755)
    found.chmod(0o755)
    StateStore(found)
    assert mode(found) == "0o700"


def test_the_example_embeddings_are_private(settings, tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    examples.mkdir()
    examples.chmod(0o755)
    # A pool of 50 questions: the folder's mode is what is checked, not the whole pool's embedding.
    retrieved = settings.override(examples={"mode": "retrieved", "pool_limit": 50})
    open_examples(retrieved.examples, data_dir=settings.data_dir, cache_dir=tmp_path, kb_spec=settings.kb.spec)
    assert mode(examples) == "0o700" and list(examples.glob("pool-*.npy"))
