from __future__ import annotations

from kifqa.kb.base import PropertyUse
from kifqa.types import Candidate, Pattern
from kifqa.pipeline import relations
from kifqa.pipeline.entities import Linking
from kifqa.data.text import name_key, normalize
from kifqa.pipeline.text import ngrams, relaxed, similarity

BROWN_1 = Candidate("Q5950", "James Brown", ("Mr. Dynamite",), "American musician", 10.0)
BROWN_2 = Candidate("Q6130343", "James Brown", (), "", 10.0)
P19 = Candidate("P19", "place of birth", ("born in", "birthplace"), "most specific known birth location")
P20 = Candidate("P20", "place of death", ("died in",), "")
P175 = Candidate("P175", "performer", (), "")


def test_text_helpers() -> None:
    assert normalize("  James  BROWN's! ") == "james brown's"
    assert name_key("The Sheltering Sky") == name_key("sheltering sky")
    assert "sasha vujačić" in ngrams("where was sasha vujačić born")
    assert relaxed("The Beatles's") == ["beatles"] or "beatles" in relaxed("The Beatles's")
    assert similarity("place of birth", "place of birth", ["born in"]) == 1.0
    assert similarity("born in", "place of birth", ["born in"]) == 0.9
    assert 0 < similarity("birth place", "place of birth") < 0.9


def _linking(*kept: Candidate, exact: bool = True) -> Linking:
    return Linking("james brown", list(kept), list(kept), exact)


def test_exact_entities_share_options_and_exact_predicate_needs_no_model() -> None:
    by_entity = {
        BROWN_1.id: [PropertyUse(P19, "forward"), PropertyUse(P20, "forward"), PropertyUse(P175, "backward")],
        BROWN_2.id: [PropertyUse(P19, "forward")],
    }
    ranked = relations.options(Pattern("james brown", "born in", "?x"), _linking(BROWN_1, BROWN_2), by_entity)
    assert ranked[0].property.id == "P19" and {e.id for e in ranked[0].entities} == {BROWN_1.id, BROWN_2.id}
    assert relations.obvious(ranked) is ranked[0]
    assert [r.entity for r in ranked[0].relations()] == [BROWN_1.id, BROWN_2.id]


def test_a_label_beats_an_alias() -> None:
    p27 = Candidate("P27", "country of citizenship", ("nationality", "country"))
    p17 = Candidate("P17", "country", ("state",))
    by_entity = {BROWN_1.id: [PropertyUse(p27, "forward"), PropertyUse(p17, "forward")]}
    ranked = relations.options(Pattern("james brown", "country", "?x"), _linking(BROWN_1), by_entity)
    assert relations.obvious(ranked).property.id == "P17"


def test_near_matches_prefer_the_better_named_entity() -> None:
    sky = Candidate("Q1988792", "The Sheltering Sky")
    vanilla = Candidate("Q110278", "Vanilla Sky")
    genre = Candidate("P136", "genre")
    by_entity = {sky.id: [PropertyUse(genre, "forward")], vanilla.id: [PropertyUse(genre, "forward")]}
    linking = Linking("sheltering sky", [sky, vanilla], [sky, vanilla], False)
    ranked = relations.options(Pattern("sheltering sky", "genre", "?x"), linking, by_entity)
    assert [o.entities[0].id for o in ranked] == [sky.id, vanilla.id]
    assert relations.obvious(ranked).entities == (sky,)


def test_typos_still_rank_the_intended_property_first() -> None:
    p40 = Candidate("P40", "child", ("has child",))
    p50 = Candidate("P50", "author", ("writer",))
    by_entity = {BROWN_1.id: [PropertyUse(p50, "backward"), PropertyUse(p40, "forward")]}
    ranked = relations.options(Pattern("?x", "chid of", "james brown"), _linking(BROWN_1), by_entity)
    assert ranked[0].property.id == "P40" and relations.obvious(ranked) is None


def test_vague_predicate_goes_to_the_model_with_numbered_options() -> None:
    by_entity = {BROWN_1.id: [PropertyUse(P19, "forward"), PropertyUse(P20, "forward")]}
    pattern = Pattern("james brown", "hometown", "?x")
    ranked = relations.options(pattern, _linking(BROWN_1), by_entity)
    assert relations.obvious(ranked) is None
    req = relations.request("what is james brown's hometown", pattern, ranked)
    assert "Draft: (james brown | hometown | ?x)\nOptions:\n" in req.messages[1].content
    assert req.grammar == 'root ::= "1" | "2"'
    assert "1. (James Brown [American musician, aka Mr. Dynamite] | place of" in req.messages[1].content
    assert relations.parse("2", ranked) is ranked[1]


def test_direction_follows_the_real_statements() -> None:
    # drafted the wrong way round: the entity is really the value of P175
    by_entity = {BROWN_1.id: [PropertyUse(P175, "backward")]}
    ranked = relations.options(Pattern("james brown", "performer", "?x"), _linking(BROWN_1), by_entity)
    assert relations.obvious(ranked).direction == "backward"
