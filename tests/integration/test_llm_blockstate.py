"""Saved KV states of shared prefixes (few-shot blocks) with the real 0.5B model: restored instead of
evaluated, and never trusted when they belong to another prompt or model or are cut or corrupt."""

from __future__ import annotations

import asyncio
import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kifqa.config import Settings
from kifqa.llm import ChatRequest, LocalLLM, Message
from kifqa.pipeline import relations
from kifqa.types import Candidate, Pattern

pytest.importorskip("xllamacpp", reason="the local backend needs xllamacpp: pip install 'kifqa[local]'")

MODEL = "qwen2.5-coder-0.5b"
SYSTEM = "Turn the question into one line (subject | predicate | ?x)."
BLOCK = (Message("system", SYSTEM), Message("user", "where was james brown born"),
         Message("assistant", "(james brown | place of birth | ?x)"))
OTHER = (Message("system", SYSTEM), Message("user", "what genre is the album thriller"),
         Message("assistant", "(thriller | genre | ?x)"))


def draft(question: str, block: tuple[Message, ...] = BLOCK, *, key: str | None = "block-1") -> ChatRequest:
    return ChatRequest(messages=block + (Message("user", question),), max_tokens=16, prefix_key=key)


def open_model(states: Path) -> LocalLLM:
    model = LocalLLM(model=MODEL, cache_dir=Settings().cache_dir, state_dir=states, parallel=2, context=512)
    model.load()
    return model


@pytest.fixture()
def states(tmp_path: Path) -> Path:
    return tmp_path / "kv"


@pytest.fixture()
def model(states: Path) -> Iterator[LocalLLM]:
    llm = open_model(states)
    yield llm
    asyncio.run(llm.aclose())


def files(states: Path) -> list[str]:
    return sorted(p.name for p in states.iterdir() if not p.name.startswith("model-"))


def test_a_restored_block_gives_the_same_draft_as_an_evaluated_one(model: LocalLLM, states: Path) -> None:
    (evaluated,) = model.generate([draft("who wrote dracula", key=None)])  # not shared: evaluated in full
    (first,) = model.generate([draft("who wrote dracula")])
    assert evaluated.ok and first.ok and evaluated.usage.cached_prompt_tokens == 0
    assert model.blocks().computed == 1 and model.blocks().restored == 0
    (state,) = [n for n in files(states) if n.endswith(".bin")]
    assert files(states) == [state, state.replace(".bin", ".json")]
    block_tokens = len(json.loads((states / state).with_suffix(".json").read_text())["key"]["tokens"])
    assert first.usage.cached_prompt_tokens == block_tokens

    other = open_model(states)  # another process on this machine: restores instead of evaluating
    try:
        (restored,) = other.generate([draft("who wrote dracula")])
        assert other.blocks().restored == 1 and other.blocks().computed == 0
        assert restored.usage.cached_prompt_tokens == block_tokens
        assert restored.text == evaluated.text == first.text
    finally:
        asyncio.run(other.aclose())


def test_a_state_of_another_prompt_or_model_is_refused_and_recomputed(model: LocalLLM, states: Path) -> None:
    assert model.prepare(draft("q", OTHER)) == "computed"
    (foreign,) = [states / n for n in files(states) if n.endswith(".bin")]
    assert model.prepare(draft("q")) == "computed"
    (own,) = [states / n for n in files(states) if n.endswith(".bin") and states / n != foreign]
    for suffix in (".bin", ".json"):  # the other prompt's state under this prompt's name
        shutil.copy(foreign.with_suffix(suffix), own.with_suffix(suffix))
    assert model.prepare(draft("q")) == "computed"
    assert model.blocks().refused == 1

    side = json.loads(own.with_suffix(".json").read_text())  # this prompt's state, said to be another model's
    side["key"]["model_sha256"] = "0" * 64
    own.with_suffix(".json").write_text(json.dumps(side))
    assert model.prepare(draft("q")) == "computed"
    assert model.blocks().refused == 2
    assert model.prepare(draft("q")) == "restored"
    (done,) = model.generate([draft("who wrote dracula")])
    assert done.ok and done.usage.cached_prompt_tokens == len(side["key"]["tokens"])


def test_a_cut_or_corrupt_state_is_recomputed(model: LocalLLM, states: Path) -> None:
    assert model.prepare(draft("q")) == "computed"
    (state,) = [states / n for n in files(states) if n.endswith(".bin")]
    data = state.read_bytes()
    state.write_bytes(data[: len(data) // 2])
    assert model.prepare(draft("q")) == "computed"
    assert len(state.read_bytes()) == len(data)  # saved again, whole
    state.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert model.prepare(draft("q")) == "computed"
    assert model.blocks().refused == 2
    (done,) = model.generate([draft("who wrote dracula")])
    assert done.ok and model.blocks().restored == 0


def test_an_instance_with_another_slot_count_keeps_its_own_state(model: LocalLLM, states: Path) -> None:
    # llama.cpp cannot restore a state saved with another number of slots (its KV streams): each slot
    # count has its own file, and neither overwrites the other.
    assert model.prepare(draft("q")) == "computed"
    single = LocalLLM(model=MODEL, cache_dir=Settings().cache_dir, state_dir=states, parallel=1, context=512)
    try:
        assert single.prepare(draft("q")) == "computed"
        assert single.blocks().refused == 0
        assert len([n for n in files(states) if n.endswith(".bin")]) == 2
        assert single.prepare(draft("q")) == "restored"
        (done,) = single.generate([draft("who wrote dracula")])
        assert done.ok and done.usage.cached_prompt_tokens > 0
    finally:
        asyncio.run(single.aclose())
    assert model.prepare(draft("q")) == "restored"


def test_the_relation_choices_system_prompt_is_kept_like_a_block(model: LocalLLM, states: Path) -> None:
    def choice(question: str) -> ChatRequest:
        shown = [relations.Option(entities=(Candidate(id="Q5", label="james brown"),),
                                  property=Candidate(id=p, label=label), direction="forward", match=0.0, score=0.0)
                 for p, label in (("P19", "place of birth"), ("P20", "place of death"))]
        return relations.request(question, Pattern("james brown", "born in", "?x"), shown)

    assert model.prepare(relations.shared_prefix()) == "computed"
    other = open_model(states)  # a later process: restores it, then evaluates only the question's options
    try:
        (first,) = other.generate([choice("where was james brown born")])
        (second,) = other.generate([choice("where did james brown die")])
        assert other.blocks().restored == 1 and other.blocks().computed == 0
        assert first.ok and second.ok and first.text in ("1", "2")
        (state,) = [n for n in files(states) if n.endswith(".json")]
        system_tokens = len(json.loads((states / state).read_text())["key"]["tokens"])
        assert first.usage.cached_prompt_tokens >= system_tokens > 20
    finally:
        asyncio.run(other.aclose())


def _post(url: str, body: dict, headers: dict[str, str] | None = None) -> int:
    """The status of a POST of ``body`` to ``url``."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_embedded_server_answers_only_kifqa_with_its_key_and_shows_no_slots(model: LocalLLM) -> None:
    """Another local user finds the port but not the key: no completion, no tokenizer, no slot action;
    kifqa's own requests (template, tokenizer, slot save and restore) go on with it."""
    assert model.prepare(draft("q")) == "computed"  # /apply-template, /tokenize, /slots/N?action=save
    base = model._server.listening_address
    for path, body in [("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
                       ("/completion", {"prompt": "hi", "n_predict": 1}), ("/tokenize", {"content": "hi"}),
                       ("/slots/0?action=erase", {}), ("/slots/0?action=save", {"filename": "stolen.bin"})]:
        assert _post(base + path, body) == 401, path
        assert _post(base + path, body, {"Authorization": "Bearer not-the-key"}) == 401, path
    with pytest.raises(urllib.error.HTTPError) as refused:  # the slots' monitor: off, even with the key
        urllib.request.urlopen(urllib.request.Request(base + "/slots", headers={"Authorization": f"Bearer {model._key}"}), timeout=60)
    assert refused.value.code in (404, 501)
    (done,) = model.generate([draft("who wrote dracula")])
    assert done.ok and model.blocks().restored + model.blocks().computed >= 1
