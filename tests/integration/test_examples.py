"""Few-shot examples: the pool built from the real training split, retrieval and clustering with the
real encoder."""

from __future__ import annotations

from collections import Counter

from kifqa.data.pool import sqwd_pool
from kifqa.examples.clustered import ClusteredExamples
from kifqa.examples.encoder import load_encoder
from kifqa.examples.sources import RetrievedExamples
from kifqa.examples.vectors import memo


def test_pool_verbalises_both_directions_as_the_question_writes_them(data_dir) -> None:
    pool = sqwd_pool(data_dir, limit=300)
    assert len(pool) == 300
    by_question = {e.question: e.draft for e in pool}
    assert by_question["who is a musician born in detroit"] == "(?x | place of birth | detroit)"  # an R row
    assert by_question["what is ellen swallow richards's nationality?"] == (
        "(ellen swallow richards | country of citizenship | ?x)")                              # a P row


def test_retrieval_finds_the_most_similar_questions_and_caches_the_pool(data_dir, tmp_path) -> None:
    pool = sqwd_pool(data_dir, limit=300)
    examples = RetrievedExamples(pool, k=3, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("pool-*.npy"))) == 1
    chosen = examples.select("where was the musician frank zappa born")
    assert len(chosen) == 3
    assert any("born" in e.question for e in chosen[-2:])  # the closest sit next to the question
    again = RetrievedExamples(pool, k=3, cache_dir=tmp_path)  # from the cache this time
    assert again.select("where was the musician frank zappa born") == chosen


def test_retrieval_never_shows_the_question_itself(data_dir, tmp_path) -> None:
    pool = sqwd_pool(data_dir, limit=300)
    examples = RetrievedExamples(pool, k=3, cache_dir=tmp_path)
    asked = pool[42].question
    shown = [e.question for e in examples.select(asked.upper() + " ?")]  # the same words, written otherwise
    assert len(shown) == 3
    assert asked not in shown
    assert pool[42].question in [e.question for e in RetrievedExamples(pool, k=300).select("x")]


def test_clustered_questions_share_their_cluster_block_as_a_prompt_prefix(data_dir, tmp_path) -> None:
    pool = sqwd_pool(data_dir, limit=300)
    examples = ClusteredExamples(pool, clusters=6, block=4, cache_dir=tmp_path)
    questions = ["where was the musician frank zappa born", "where was the painter frida kahlo born",
                 "what is a film directed by ridley scott", "what genre is the album abbey road",
                 "which country is the city of porto in"]
    keys = [examples.prefix_key(q) for q in questions]
    assert len(set(keys)) > 1  # not one block for everything
    for q, key in zip(questions, keys, strict=True):
        shown = examples.select(q)
        assert len(shown) == 4
        assert shown == [pool[i] for i in examples.blocks[examples.cluster(q)]]
        for other, other_key in zip(questions, keys, strict=True):
            assert (examples.select(other) == shown) == (other_key == key)
    assert keys == [ClusteredExamples(pool, clusters=6, block=4, cache_dir=tmp_path).prefix_key(q)
                    for q in questions]  # the same blocks every time


def test_a_cluster_block_covers_its_most_asked_relations_first(data_dir, tmp_path) -> None:
    pool = sqwd_pool(data_dir, limit=300)
    examples = ClusteredExamples(pool, clusters=4, block=5, cache_dir=tmp_path)
    for c, block in enumerate(examples.blocks):
        members = [pool[i] for i in range(len(pool)) if examples.labels[i] == c]
        counts = Counter(e.relation() for e in members)
        shown = [pool[i].relation() for i in block]
        assert len(set(shown)) == min(5, len(counts))   # distinct relations before repeats
        assert counts[shown[-1]] == max(counts.values())  # the most asked one next to the question


def test_clustered_examples_never_show_the_question_itself_and_add_its_nearest(data_dir, tmp_path) -> None:
    pool = sqwd_pool(data_dir, limit=300)
    examples = ClusteredExamples(pool, clusters=4, block=5, nearest=2, cache_dir=tmp_path)
    c, inside = next((c, pool[b[0]].question) for c, b in enumerate(examples.blocks)
                     if examples.cluster(pool[b[0]].question) == c)
    shown = examples.select(inside)
    assert inside not in [e.question for e in shown]
    assert len(shown) == 4 + 2  # the block without the question, then its two nearest examples
    assert shown[:4] == [pool[i] for i in examples.blocks[c][1:]]
    assert all(e not in shown[:4] for e in shown[4:])


def test_prepared_questions_are_embedded_in_one_batch_and_select_as_embedded_one_by_one(data_dir, tmp_path,
                                                                                         monkeypatch) -> None:
    """A shard's questions are embedded in one encoder call (``prepare``, as ``Pipeline.prepare`` does), and
    choosing their examples afterwards encodes nothing more and chooses what one-by-one embedding does."""
    pool = sqwd_pool(data_dir, limit=300)
    questions = [e.question + " ?" for e in pool[:40]]
    one_by_one = ClusteredExamples(pool, clusters=6, block=4, cache_dir=tmp_path)
    expected = [one_by_one.select(q) for q in questions]
    examples = ClusteredExamples(pool, clusters=6, block=4, cache_dir=tmp_path)
    memo.cache_clear()  # a process that has embedded none of them yet
    calls: list[int] = []
    encode = load_encoder().encode
    monkeypatch.setattr(load_encoder(), "encode", lambda texts: calls.append(len(texts)) or encode(texts))
    examples.prepare(questions + questions[:5])
    assert calls == [40]
    assert [examples.select(q) for q in questions] == expected and calls == [40]
