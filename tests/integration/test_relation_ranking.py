"""The relation step's ranking by meaning, with the real question encoder: where the draft names no
property exactly, the property closest in meaning to the question and predicate is shown first."""

from __future__ import annotations

import asyncio
from collections import Counter

import numpy as np
import pytest

from kifqa.data.pool import sqwd_pool
from kifqa.examples.embeddings import EmbeddedPool
from kifqa.examples.encoder import load_encoder
from kifqa.examples.precedents import Precedents
from kifqa.examples.precedents import closeness as meaning
from kifqa.examples.vectors import SavedVectors, memo
from kifqa.kb.base import PropertyUse
from kifqa.pipeline import relations
from kifqa.pipeline.entities import Linking
from kifqa.types import Candidate, Pattern
from tests.conftest import TEST_CACHE

CLUTTER = Candidate(id="Q1947410", label="Your Future Our Clutter", description="album by The Fall")
COUNTRY = Candidate(id="P17", label="country", description="sovereign state that this subject item is in")
PERFORMER = Candidate(id="P175", label="performer",
                      description="actor, musician, band or other performer associated with this role or musical work")
BASED_ON = Candidate(id="P144", label="based on", description="the work(s) or inputs used as the basis for subject item")
LYRICS = Candidate(id="P676", label="lyrics by", description="author of song lyrics")


def test_the_property_closest_in_meaning_comes_first() -> None:
    question, pattern = "What band recorded your future our clutter?", Pattern("future our clutter", "band", "?x")
    props = [COUNTRY, BASED_ON, PERFORMER, LYRICS]
    closeness = meaning(question, pattern.predicate, props)
    assert max(closeness, key=closeness.__getitem__) == "P175"
    assert all(0.0 <= v <= 1.0 for v in closeness.values())
    by_entity = {CLUTTER.id: [PropertyUse(property=p, direction="forward") for p in props]}
    linking = Linking("future our clutter", [CLUTTER], [CLUTTER], False)
    by_names = relations.options(pattern, linking, by_entity, question=question)
    by_meaning = relations.options(pattern, linking, by_entity, question=question, closeness=closeness)
    assert by_meaning[0].property.id == "P175" and by_meaning[0].match == relations.MEANING_MATCH * closeness["P175"]
    assert by_names[0].property.id != "P175", "spelling and shared words alone put another property first"
    again = meaning(question, pattern.predicate, props)
    assert again == pytest.approx(closeness, abs=1e-6), "the same with cached embeddings"


def test_an_exact_name_still_comes_first_and_needs_no_model() -> None:
    born = Candidate(id="P19", label="place of birth", aliases=("born in",), description="most specific birth location")
    home = Candidate(id="P551", label="residence", description="the place where the person is or has been, resident")
    entity = Candidate(id="Q1", label="Sasha Vujačić")
    closeness = meaning("where did sasha vujačić live", "born in", [born, home])
    by_entity = {entity.id: [PropertyUse(property=home, direction="forward"), PropertyUse(property=born, direction="forward")]}
    ranked = relations.options(Pattern("sasha vujačić", "born in", "?x"), Linking("x", [entity], [entity], True),
                               by_entity, question="where did sasha vujačić live", closeness=closeness)
    assert ranked[0].property.id == "P19" and relations.obvious(ranked) is ranked[0]


def test_a_typo_still_finds_its_property() -> None:
    child = Candidate(id="P40", label="child", description="subject has object as child")
    author = Candidate(id="P50", label="author", description="main creator(s) of a written work")
    leiber = Candidate(id="Q313185", label="Fritz Leiber")
    props = [author, child]
    closeness = meaning("who is the chid of fritz leiber?", "chid", props)
    by_entity = {leiber.id: [PropertyUse(property=p, direction="forward") for p in props]}
    ranked = relations.options(Pattern("fritz leiber", "chid", "?x"), Linking("x", [leiber], [leiber], True),
                               by_entity, question="who is the chid of fritz leiber?", closeness=closeness)
    assert ranked[0].property.id == "P40" and ranked[0].match >= relations.SPELLING_MATCH


def test_the_ranking_encodes_only_what_the_process_has_not_embedded(monkeypatch) -> None:
    """The question's embedding is the one its examples were chosen with, and a property met again is not
    encoded again: on the batch job's hot path, ranking costs the encoder a predicate at most."""
    memo.cache_clear()
    question = "What band recorded your future our clutter?"
    memo().vectors([question])  # as choosing the question's examples leaves it
    calls: list[list[str]] = []
    encode = load_encoder().encode
    monkeypatch.setattr(load_encoder(), "encode", lambda texts: calls.append(texts) or encode(texts))
    first = meaning(question, "band", [COUNTRY, PERFORMER])
    assert calls == [["band", "country: sovereign state that this subject item is in",
                      "performer: actor, musician, band or other performer associated with this role or musical work"]]
    again = meaning(question, "band", [PERFORMER, COUNTRY, LYRICS])
    assert calls[1:] == [["lyrics by: author of song lyrics"]]
    assert again["P175"] == first["P175"] and again["P17"] == first["P17"]


def test_saved_embeddings_spare_a_new_process_the_encoder_and_a_bad_row_is_encoded_again(tmp_path,
                                                                                         monkeypatch) -> None:
    """The properties' and predicates' embeddings are kept on disk: a process that has never met them
    (a new Ray worker, the next ``kifqa ask``) reads them instead of encoding them, and gets the same
    closeness; a row of the wrong size is not trusted."""
    question, props = "What band recorded your future our clutter?", [COUNTRY, PERFORMER]
    saved = SavedVectors(tmp_path)
    memo.cache_clear()
    first = meaning(question, "band", props, saved=saved)
    memo.cache_clear()  # a new process
    memo().vectors([question])
    calls: list[list[str]] = []
    encode = load_encoder().encode
    monkeypatch.setattr(load_encoder(), "encode", lambda texts: calls.append(texts) or encode(texts))
    assert meaning(question, "band", props, saved=SavedVectors(tmp_path)) == first and calls == []
    SavedVectors(tmp_path).put({"band": np.zeros(7, np.float32)})  # truncated
    memo.cache_clear()
    memo().vectors([question])
    calls.clear()
    assert meaning(question, "band", props, saved=SavedVectors(tmp_path)) == pytest.approx(first, abs=1e-6)
    assert calls == [["band"]]


def test_a_pipeline_with_fixed_examples_still_embeds_its_questions_in_one_batch(monkeypatch) -> None:
    """Ranking by meaning needs each question's embedding even where the examples do not: preparing a
    shard encodes its questions together, and answering them encodes none of them again."""
    from kifqa.config import PipelineSettings
    from kifqa.examples.sources import FixedExamples
    from kifqa.pipeline import Pipeline
    from kifqa.types import Question

    memo.cache_clear()
    calls: list[int] = []
    encode = load_encoder().encode
    monkeypatch.setattr(load_encoder(), "encode", lambda texts: calls.append(len(texts)) or encode(texts))
    questions = [Question(str(i), f"who wrote book number {i}?") for i in range(12)]
    pipeline = Pipeline(kb=None, llm=None, examples=FixedExamples(),  # type: ignore[arg-type]  # prepare uses neither
                        settings=PipelineSettings(rank_relations="meaning"))
    pipeline.prepare(questions)
    assert calls == [12]
    meaning(questions[3].text, "author", [LYRICS])
    assert calls == [12, 2], "the predicate and the property, not the question"
    calls.clear()
    Pipeline(kb=None, llm=None, examples=FixedExamples(),  # type: ignore[arg-type]
             settings=PipelineSettings(rank_relations="names")).prepare([Question("x", "who wrote x?")])
    assert calls == [], "ranking by names needs no embedding"


EVANS = Candidate(id="Q6805301", label="Medford Bryan Evans")
PERSON_PROPERTIES = [
    Candidate(id="P27", label="country of citizenship",
              description="the object is a country that recognizes the subject as its citizen"),
    Candidate(id="P112", label="founder", description="founder or co-founder of this organization, religion, place or entity"),
    Candidate(id="P19", label="place of birth",
              description="most specific known birth location of a person, animal or fictional character"),
    Candidate(id="P172", label="ethnic group", description="subject's ethnicity"),
]


def test_what_similar_questions_ask_for_lifts_its_option(data_dir) -> None:
    """The pool questions nearest to the question, whoever they ask about, vote for the relations they ask;
    their votes move a country-of-a-person relation above "founder", which meaning alone puts first."""
    pool = EmbeddedPool(sqwd_pool(data_dir, limit=2000), cache_dir=TEST_CACHE / "examples")  # embedded once
    question, pattern = "What country is medford bryan evans from", Pattern("medford bryan evans", "country of origin", "?x")
    [votes] = Precedents(pool).count([(question, "medford bryan evans")], 20)
    assert sum(votes.values()) == pytest.approx(1.0)
    assert max(votes, key=votes.__getitem__) == ("country of citizenship", "forward")
    # The question as written finds questions about other people's birthplaces: the names weigh in.
    as_written = Counter(e.relation() for e in pool.nearest(question, 20))
    assert as_written.most_common(1)[0][0] == ("place of birth", False)
    closeness = meaning(question, pattern.predicate, PERSON_PROPERTIES)
    by_entity = {EVANS.id: [PropertyUse(property=p, direction="forward") for p in PERSON_PROPERTIES]}
    linking = Linking("x", [EVANS], [EVANS], True)
    alone = relations.options(pattern, linking, by_entity, question=question, closeness=closeness)
    voted = relations.options(pattern, linking, by_entity, question=question, closeness=closeness, votes=votes)
    assert alone[0].property.id == "P112"
    assert voted[0].property.id in {"P19", "P27"} and voted[0].score > alone[0].score


def test_a_clear_lead_is_taken_without_the_model() -> None:
    def option(pid: str, score: float) -> relations.Option:
        return relations.Option((EVANS,), Candidate(id=pid, label=pid), "forward", 0.0, score)

    close, clear = [option("P19", 0.30), option("P27", 0.25)], [option("P19", 0.40), option("P27", 0.25)]
    assert relations.obvious(close) is None and relations.obvious(clear) is None
    assert relations.obvious(close, lead=0.1) is None
    assert relations.obvious(clear, lead=0.1) is clear[0]


def test_concurrent_questions_votes_are_counted_in_one_batch(data_dir) -> None:
    """Questions asked at the same time share one encoder batch and one matrix product per pool, and get
    the votes each would get alone."""
    precedents = Precedents(EmbeddedPool(sqwd_pool(data_dir, limit=2000), cache_dir=TEST_CACHE / "examples"))
    asked = [("who is clara harris parent?", "clara harris"), ("where was james brown born", "james brown"),
             ("What country is medford bryan evans from", "medford bryan evans")]

    async def together() -> list:
        return await asyncio.gather(*(precedents.of(q, known, 20) for q, known in asked))

    votes = asyncio.run(together())
    assert precedents._batches.batches == 1 and precedents._batches.lookups == 3
    assert votes == [precedents.count([one], 20)[0] for one in asked]
    assert votes[1] != votes[2]
