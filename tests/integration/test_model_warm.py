"""``kifqa model warm`` with the real 0.5B model: the few-shot blocks split across model instances and every
state written, and the example pool's embeddings (plain and masked) computed once, so that what a run opens
encodes none of them again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kifqa.cli.model import model
from kifqa.config import Settings
from kifqa.data.pool import sqwd_pool
from kifqa.examples import open_examples
from kifqa.examples.encoder import load_encoder
from kifqa.examples.precedents import MASKED, Precedents
from kifqa.llm import weights
from kifqa.llm.blockstate import file_sha256
from kifqa.llm.warm import split

pytest.importorskip("xllamacpp", reason="the local backend needs xllamacpp: pip install 'kifqa[local]'")

MODEL = "qwen2.5-coder-0.5b"
POOL = 60
CLUSTERS = 3


@pytest.fixture(scope="module")
def model_file() -> Path:
    """The 0.5B model's file in the real cache folder (assembled once, shared with the other model tests)."""
    return weights.assemble(weights.KNOWN_MODELS[MODEL], cache_dir=Settings().cache_dir)


def test_split_deals_every_item_once() -> None:
    assert split(list(range(7)), 2) == [[0, 2, 4, 6], [1, 3, 5]]
    assert split(list(range(2)), 3) == [[0], [1], []]
    with pytest.raises(ValueError):
        split([1], 0)


@pytest.fixture
def warm_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_file: Path) -> tuple[Path, Path]:
    """A settings file for the 0.5B model over a small clustered pool, and its cache folder (empty but for
    the assembled model files)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(model_file.parent)
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(cache))
    config = tmp_path / "kifqa.yaml"
    config.write_text(json.dumps({
        "llm": {"model": MODEL, "context": 1024, "parallel": 2},
        "examples": {"mode": "clustered", "pool_limit": POOL, "clusters": CLUSTERS, "block": 2},
    }))
    return config, cache


def test_warm_splits_the_blocks_and_caches_every_pool_embedding(
        monkeypatch: pytest.MonkeyPatch, warm_config: tuple[Path, Path]) -> None:
    config, cache = warm_config
    encoder = load_encoder()
    encode = encoder.encode
    encoded: list[int] = []

    def counting(texts: list[str], **kwargs: object) -> object:
        encoded.append(len(texts))
        return encode(texts, **kwargs)  # type: ignore[arg-type]  # the encoder's own keywords

    monkeypatch.setattr(encoder, "encode", counting)

    result = CliRunner().invoke(model, ["warm", "--config", str(config), "--instances", "2"])

    assert result.exit_code == 0, result.output
    blocks = CLUSTERS + 1  # the clusters' blocks and the relation choice's system prompt
    assert f"{blocks} block(s) in {cache / 'kv'} on 2 instance(s) (2+2): {blocks} computed, 0 already saved" \
        in result.output
    states = sorted((cache / "kv").glob("*.bin"))
    assert len(states) == blocks
    for state in states:  # each written whole, beside the sidecar that vouches for it
        side = json.loads(state.with_suffix(".json").read_text())
        assert side["bytes"] == state.stat().st_size > 0 and side["sha256"] == file_sha256(state)
    pool = sqwd_pool(Settings().data_dir, limit=POOL)
    read = [{tuple(e.ids) for e in encoder.tokenizer.encode_batch(texts)}
            for texts in ([e.question for e in pool], [MASKED.text(e) for e in pool])]
    assert encoded == [len(read[0]), len(read[1])] and len(read[1]) < POOL  # as written, then masked: each once

    encoded.clear()
    settings = Settings.load(config)
    source = open_examples(settings.examples, data_dir=settings.data_dir, cache_dir=settings.cache_dir,
                           kb_spec=settings.kb.spec)  # what a run opens: the examples, then the precedent votes' pool
    assert source.pool is not None
    Precedents(source.pool)
    assert encoded == []


def test_warm_for_a_corpus_computes_only_the_blocks_its_questions_use(
        tmp_path: Path, warm_config: tuple[Path, Path]) -> None:

    config, cache = warm_config
    question = sqwd_pool(Settings().data_dir, limit=POOL)[0].question
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": f"q{i}", "question": question}) for i in range(3)) + "\n")

    result = CliRunner().invoke(model, ["warm", "--config", str(config), "--instances", "2", "--for", str(corpus)])

    assert result.exit_code == 0, result.output
    # one cluster's block (three questions, one cluster) and the relation choice's system prompt
    assert f"2 block(s) in {cache / 'kv'} on 2 instance(s) (1+1): 2 computed" in result.output
    assert len(list((cache / "kv").glob("*.bin"))) == 2


@pytest.mark.slow
def test_bench_warm_computes_the_same_blocks_on_each_side(warm_config: tuple[Path, Path]) -> None:
    from kifqa.bench.warm import warm as bench_warm

    config, cache = warm_config

    result = CliRunner().invoke(bench_warm, ["--config", str(config), "--blocks", "2", "--instances", "2"])

    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line.split()[:1] in (["1"], ["2"])]
    assert [(r[0], r[1]) for r in rows] == [("1", "2"), ("2", "2")]  # each side computed both, nothing restored
    assert "speed-up" in result.output and not (cache / "kv").exists()  # the states went to temporary folders


def test_the_pool_embedded_side_by_side_is_the_pool_embedded_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks encoded by several threads come back in the pool's order, each row its question's."""
    from kifqa.examples import embeddings

    pool = sqwd_pool(Settings().data_dir, limit=POOL)
    monkeypatch.setattr(embeddings, "_CHUNK", 7)  # 9 chunks over the worker threads
    embedded = embeddings.EmbeddedPool(pool, cache_dir=tmp_path)
    at_once = load_encoder().encode([e.question for e in pool])
    assert embedded.matrix.shape == at_once.shape
    assert abs(embedded.matrix - at_once).max() < 1e-5
