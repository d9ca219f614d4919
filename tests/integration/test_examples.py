"""Few-shot examples: the pool built from the real training split, retrieval with the real encoder."""

from __future__ import annotations

from kifqa.pipeline.examples import RetrievedExamples, sqwd_pool


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
