"""The record/replay cache: a real SQLite file in front of a scripted model."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kifqa.config import LLMSettings, Settings
from kifqa.llm import LLM, CachedLLM, ChatRequest, Completion, LocalLLM, Message, Usage, open_llm
from kifqa.llm.cache import request_key


class Scripted(LLM):
    """Answers ``answer #n to <question>``; ``fail`` in a question makes that request fail."""

    def __init__(self, identity: str = "scripted:v1") -> None:
        self.identity = identity
        self.calls: list[list[ChatRequest]] = []
        self.closed = False

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        self.calls.append(list(requests))
        out = []
        for r in requests:
            question = r.messages[-1].content
            if "fail" in question:
                out.append(Completion(error="scripted failure"))
            else:
                n = sum(len(c) for c in self.calls)
                out.append(Completion(text=f"answer #{n} to {question}",
                                      usage=Usage(prompt_tokens=10 + len(question), completion_tokens=4,
                                                  cached_prompt_tokens=6, latency_s=0.5),
                                      logprobs=(-0.5, -0.125, 0.0, -3.25)))
        return out

    async def aclose(self) -> None:
        self.closed = True


def ask(question: str, **kwargs: Any) -> ChatRequest:
    messages = (Message("system", "sys"), Message("user", question))
    return ChatRequest(messages=messages, **kwargs)


def test_record_then_replay_gives_the_same_texts_without_the_model(tmp_path: Path) -> None:
    path = tmp_path / "cassette.sqlite"
    model = Scripted()
    recorder = CachedLLM(model, path=path, mode="record")
    questions = [ask("a"), ask("b", grammar='root ::= "x"'), ask("c", max_tokens=7)]
    recorded = recorder.generate(questions)
    assert all(c.ok and not c.usage.cache_hit for c in recorded)

    again = recorder.generate(questions)  # record mode reads too
    assert len(model.calls) == 1
    assert [c.text for c in again] == [c.text for c in recorded]

    silent = Scripted()
    replayer = CachedLLM(silent, path=path, mode="replay")
    replayed = replayer.generate(questions)
    assert silent.calls == []
    assert [c.text for c in replayed] == [c.text for c in recorded]
    for old, new in zip(recorded, replayed, strict=True):
        assert new.usage.cache_hit
        assert (new.usage.prompt_tokens, new.usage.completion_tokens) == (old.usage.prompt_tokens, 4)
        assert new.usage.cached_prompt_tokens == 0 and new.usage.latency_s == 0.0
        assert new.usage.recorded is not None  # what the answer cost when it was recorded
        assert (new.usage.recorded.cached_prompt_tokens, new.usage.recorded.latency_s) == (6, 0.5)
    assert replayer.identity == "scripted:v1"


def old_layout(path: Path) -> Path:
    """An empty cache file in the layout before recorded costs were kept (no ``usage`` column)."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE completions (key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL,"
                   " text TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,"
                   " created REAL NOT NULL)")
    return path


def columns(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[1] for row in db.execute("PRAGMA table_info(completions)")]


def test_a_file_without_recorded_costs_still_replays_and_gains_them(tmp_path: Path) -> None:
    path = old_layout(tmp_path / "old.sqlite")
    cache = CachedLLM(Scripted(), path=path, mode="record")
    [first] = cache.generate([ask("a")])
    [again] = cache.generate([ask("a")])
    assert again.usage.cache_hit and again.text == first.text
    assert again.usage.recorded is not None and again.usage.recorded.latency_s == 0.5
    assert "usage" in columns(path)


def test_replaying_a_file_without_recorded_costs_leaves_its_table_as_it_is(tmp_path: Path) -> None:
    path = old_layout(tmp_path / "old.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO completions VALUES (?, 'scripted:v1', '{}', 'x', 3, 1, 0)",
                   (request_key("scripted:v1", ask("a"))[0],))
    silent = Scripted()
    [hit] = CachedLLM(silent, path=path, mode="replay").generate([ask("a")])
    assert hit.ok and hit.text == "x" and hit.usage.cache_hit and hit.usage.recorded is None
    assert silent.calls == [] and "usage" not in columns(path)  # a replaying run writes no new column


def test_token_logprobs_replay_as_recorded(tmp_path: Path) -> None:
    path = tmp_path / "cassette.sqlite"
    [recorded] = CachedLLM(Scripted(), path=path, mode="record").generate([ask("a")])
    [replayed] = CachedLLM(Scripted(), path=path, mode="replay").generate([ask("a")])
    assert replayed.usage.cache_hit and replayed.logprobs == recorded.logprobs == (-0.5, -0.125, 0.0, -3.25)


def test_an_entry_recorded_without_logprobs_replays_with_none(tmp_path: Path) -> None:
    path = tmp_path / "cassette.sqlite"
    CachedLLM(Scripted(), path=path, mode="record").generate([ask("a")])
    with sqlite3.connect(path) as db:  # the usage blob as it was written before logprobs were kept
        db.execute("UPDATE completions SET usage = ?",
                   ('{"cached_prompt_tokens": 6, "latency_s": 0.5, "prompt_s": 0, "generation_s": 0}',))
    [hit] = CachedLLM(Scripted(), path=path, mode="replay").generate([ask("a")])
    assert hit.ok and hit.logprobs == () and hit.usage.recorded is not None and hit.usage.recorded.latency_s == 0.5


def test_replay_miss_is_a_per_request_error(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    CachedLLM(Scripted(), path=path).generate([ask("known")])
    replayer = CachedLLM(Scripted(), path=path, mode="replay")
    hit, miss = replayer.generate([ask("known"), ask("unknown")])
    assert hit.ok and hit.usage.cache_hit
    assert not miss.ok and "replay cache miss" in miss.error and "scripted:v1" in miss.error


@pytest.mark.parametrize("change", [
    {"grammar": "root ::= \"y\""}, {"max_tokens": 9}, {"temperature": 0.7}, {"stop": ("\n",)},
])
def test_the_key_covers_decoding_parameters(tmp_path: Path, change: dict) -> None:
    path = tmp_path / "c.sqlite"
    CachedLLM(Scripted(), path=path).generate([ask("q")])
    (miss,) = CachedLLM(Scripted(), path=path, mode="replay").generate([ask("q", **change)])
    assert not miss.ok


def test_the_key_covers_the_model_identity_and_messages(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    CachedLLM(Scripted("model-a"), path=path).generate([ask("q")])
    (other_model,) = CachedLLM(Scripted("model-b"), path=path, mode="replay").generate([ask("q")])
    changed_system = ChatRequest(messages=(Message("system", "other"), Message("user", "q")))
    (other_prompt,) = CachedLLM(Scripted("model-a"), path=path, mode="replay").generate([changed_system])
    assert not other_model.ok and not other_prompt.ok


def test_failures_are_not_recorded(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    model = Scripted()
    cached = CachedLLM(model, path=path)
    first = cached.generate([ask("please fail"), ask("fine")])
    assert [c.ok for c in first] == [False, True]
    second = cached.generate([ask("please fail"), ask("fine")])
    assert [len(c) for c in model.calls] == [2, 1]  # only the failure is asked again
    assert second[1].usage.cache_hit and not second[0].ok


def test_off_passes_through_without_a_file(tmp_path: Path) -> None:
    path = tmp_path / "never.sqlite"
    model = Scripted()
    cached = CachedLLM(model, path=path, mode="off")
    cached.generate([ask("q")])
    cached.generate([ask("q")])
    assert len(model.calls) == 2 and not path.exists()


def test_aclose_closes_the_model_too(tmp_path: Path) -> None:
    import asyncio

    model = Scripted()
    asyncio.run(CachedLLM(model, path=tmp_path / "c.sqlite").aclose())
    assert model.closed


def test_replay_never_loads_the_local_model(tmp_path: Path) -> None:
    """Replaying through ``open_llm`` answers from the file; the GGUF (absent here) is never loaded."""
    cassette = tmp_path / "c.sqlite"
    absent = tmp_path / "absent-model.gguf"
    identity = LocalLLM(model=str(absent), cache_dir=tmp_path).identity
    CachedLLM(Scripted(identity), path=cassette).generate([ask("q")])

    settings = Settings(cache_dir=tmp_path, llm=LLMSettings(backend="local", model=str(absent),
                                                            cache=cassette, cache_mode="replay"))
    llm = open_llm(settings)
    assert isinstance(llm, CachedLLM) and isinstance(llm.llm, LocalLLM)
    (done,) = llm.generate([ask("q")])
    assert done.ok and done.usage.cache_hit
    assert llm.llm._server is None


def _record_in_process(path: str, worker: int) -> None:
    cached = CachedLLM(Scripted(), path=Path(path))
    for batch in range(10):
        results = cached.generate([ask(f"w{worker}-b{batch}-q{i}") for i in range(5)])
        assert all(r.ok for r in results)


def test_several_processes_record_into_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_record_in_process, args=(str(path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM completions").fetchone() == (200,)
    (hit,) = CachedLLM(Scripted(), path=path, mode="replay").generate([ask("w3-b9-q4")])
    assert hit.ok and hit.text.endswith("to w3-b9-q4")
