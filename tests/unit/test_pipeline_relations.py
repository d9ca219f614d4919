from __future__ import annotations

import pytest

from kifqa.data.text import name_key, normalize
from kifqa.examples.text import (
    SPELLING_MATCH,
    article_before,
    article_takers,
    masked,
    ngrams,
    relaxed,
    similarity,
    singular,
)
from kifqa.kb.base import PropertyUse
from kifqa.pipeline import relations
from kifqa.pipeline.entities import Linking
from kifqa.types import Candidate, Pattern, Relation, RelationChoice

BROWN_1 = Candidate(id="Q5950", label="James Brown", aliases=("Mr. Dynamite",), description="American musician", score=10.0)
BROWN_2 = Candidate(id="Q6130343", label="James Brown", aliases=(), description="", score=10.0)
P19 = Candidate(id="P19", label="place of birth", aliases=("born in", "birthplace"), description="most specific known birth location")
P20 = Candidate(id="P20", label="place of death", aliases=("died in",), description="")
P175 = Candidate(id="P175", label="performer", aliases=(), description="")


def test_text_helpers() -> None:
    assert normalize("  James  BROWN's! ") == "james brown's"
    assert name_key("The Sheltering Sky") == name_key("sheltering sky")
    assert "sasha vujačić" in ngrams("where was sasha vujačić born")
    assert relaxed("The Beatles's") == ["beatles"] or "beatles" in relaxed("The Beatles's")
    assert similarity("place of birth", "place of birth", ["born in"]) == 1.0
    assert similarity("born in", "place of birth", ["born in"]) == 0.9
    assert 0 < similarity("birth place", "place of birth") < 0.9


@pytest.mark.parametrize(("question", "name", "said"), [
    ("which film genre is the suicide club under", "suicide club", "the"),
    ("which film genre is the suicide club under", "The Suicide Club", "the"),  # the name's own article aside
    ("which author wrote infidel", "infidel", ""),
    ("what country is the show salamander from", "salamander", ""),  # "the" does not stand before the name
    ("who is an opera singer", "opera singer", "an"),
    ("who played mark o'hara", "mark ohara", ""),  # apostrophes dropped on both sides
    ("what is x", "y", None),
])
def test_the_article_a_question_writes_before_a_name(question: str, name: str, said: str | None) -> None:
    assert article_before(question, name) == said


def test_exact_namesakes_keep_those_whose_article_the_question_writes() -> None:
    club, the_club = Candidate(id="Q1", label="Suicide Club"), Candidate(id="Q2", label="The Suicide Club")
    aka = Candidate(id="Q3", label="Jisatsu Circle", aliases=("The Suicide Club",))
    genre = Candidate(id="P136", label="genre")
    kept = [club, the_club, aka]
    linking = Linking("suicide club", kept, kept, True)
    by_entity = {c.id: [PropertyUse(property=genre, direction="forward")] for c in kept}
    pattern = Pattern("suicide club", "genre", "?x")

    def entities(question: str) -> list[str]:
        [option] = relations.options(pattern, linking, by_entity, question=question)
        return [e.id for e in option.entities]

    assert entities("which film genre is the suicide club under") == ["Q2", "Q3"]  # an alias counts
    assert entities("which film genre is suicide club under") == ["Q1"]
    assert entities("what genre is a suicide club") == ["Q1", "Q2", "Q3"], "none takes 'a': all stay"
    assert entities("what genre is it") == ["Q1", "Q2", "Q3"], "the name is not in the question: all stay"
    near = Linking("suicide club", kept, kept, False)
    options = relations.options(pattern, near, by_entity, question="which film genre is the suicide club under")
    assert [[e.id for e in o.entities] for o in options] == [["Q1", "Q2"], ["Q3"]], "near matches: as before"


@pytest.mark.parametrize(("text", "one"), [("dramas", "drama"), ("ray krocs", "ray kroc"), ("super bowlS", "super bowl"),
                                          ("peter odemwingies", "peter odemwingie"), ("class", None), ("bus", None),
                                          ("x-rays", None), ("", None)])
def test_a_name_loses_the_s_of_a_plural_or_a_bare_possessive(text: str, one: str | None) -> None:
    assert singular(text) == one


def _linking(*kept: Candidate, exact: bool = True) -> Linking:
    return Linking("james brown", list(kept), list(kept), exact)


def test_exact_entities_share_options_and_exact_predicate_needs_no_model() -> None:
    by_entity = {
        BROWN_1.id: [PropertyUse(property=P19, direction="forward"), PropertyUse(property=P20, direction="forward"), PropertyUse(property=P175, direction="backward")],
        BROWN_2.id: [PropertyUse(property=P19, direction="forward")],
    }
    ranked = relations.options(Pattern("james brown", "born in", "?x"), _linking(BROWN_1, BROWN_2), by_entity)
    assert ranked[0].property.id == "P19" and {e.id for e in ranked[0].entities} == {BROWN_1.id, BROWN_2.id}
    assert relations.obvious(ranked) is ranked[0]
    assert [r.entity for r in ranked[0].relations()] == [BROWN_1.id, BROWN_2.id]


def test_a_label_beats_an_alias() -> None:
    p27 = Candidate(id="P27", label="country of citizenship", aliases=("nationality", "country"))
    p17 = Candidate(id="P17", label="country", aliases=("state",))
    by_entity = {BROWN_1.id: [PropertyUse(property=p27, direction="forward"), PropertyUse(property=p17, direction="forward")]}
    ranked = relations.options(Pattern("james brown", "country", "?x"), _linking(BROWN_1), by_entity)
    assert relations.obvious(ranked).property.id == "P17"


def test_near_matches_prefer_the_better_named_entity() -> None:
    sky = Candidate(id="Q1988792", label="The Sheltering Sky")
    vanilla = Candidate(id="Q110278", label="Vanilla Sky")
    genre = Candidate(id="P136", label="genre")
    by_entity = {sky.id: [PropertyUse(property=genre, direction="forward")], vanilla.id: [PropertyUse(property=genre, direction="forward")]}
    linking = Linking("sheltering sky", [sky, vanilla], [sky, vanilla], False)
    ranked = relations.options(Pattern("sheltering sky", "genre", "?x"), linking, by_entity)
    assert [o.entities[0].id for o in ranked] == [sky.id, vanilla.id]
    assert relations.obvious(ranked).entities == (sky,)


def test_precedent_votes_overrule_an_exactly_named_property_few_similar_questions_ask_for() -> None:
    player = Candidate(id="Q19204627", label="American football player")
    sport = Candidate(id="P641", label="sport")
    occupation = Candidate(id="P106", label="occupation", aliases=("profession",))
    by_entity = {player.id: [PropertyUse(property=sport, direction="backward"),
                             PropertyUse(property=occupation, direction="backward")]}
    pattern = Pattern("?x", "sport", "american football player")

    def ranked(sport_votes: float, occupation_votes: float) -> list[relations.Option]:
        votes = {("sport", "backward"): sport_votes, ("occupation", "backward"): occupation_votes}
        return relations.options(pattern, _linking(player), by_entity, votes=votes)

    contradicted = ranked(0.075, 0.45)
    assert contradicted[0].property.id == "P641" and relations.obvious(contradicted) is contradicted[0]
    assert relations.overruling(contradicted) is contradicted[1]
    assert (contradicted[1].property.id, contradicted[1].direction, contradicted[1].votes) == ("P106", "backward", 0.45)
    # Enough votes for the named property, or too few for any other: the name stands.
    assert relations.overruling(ranked(relations.OVERRULED_BELOW, 0.45)) is None
    assert relations.overruling(ranked(0.0, relations.OVERRULING - 0.01)) is None
    # A property the draft does not name exactly is never overruled (the votes already weigh in its score).
    unnamed = relations.options(Pattern("?x", "plays", "american football player"), _linking(player), by_entity,
                                votes={("occupation", "backward"): 0.45})
    assert unnamed[0].match < relations.ALIAS_MATCH and relations.overruling(unnamed) is None


def test_votes_that_lead_the_named_property_by_far_overrule_it() -> None:
    p27 = Candidate(id="P27", label="country of citizenship")
    by_entity = {BROWN_1.id: [PropertyUse(property=P19, direction="forward"), PropertyUse(property=p27, direction="forward")]}
    pattern = Pattern("james brown", "place of birth", "?x")

    def ranked(birth_votes: float, citizenship_votes: float) -> list[relations.Option]:
        votes = {("place of birth", "forward"): birth_votes, ("country of citizenship", "forward"): citizenship_votes}
        return relations.options(pattern, _linking(BROWN_1), by_entity, votes=votes)

    led = ranked(0.15, 0.15 + relations.OVERRULING_LEAD)
    assert led[0].property.id == "P19" and relations.obvious(led) is led[0]
    assert relations.overruling(led) is led[1] and led[1].property.id == "P27"
    # A lead short of OVERRULING_LEAD leaves the named property, however many votes the other has.
    assert relations.overruling(ranked(0.15, 0.14 + relations.OVERRULING_LEAD)) is None
    assert relations.overruling(ranked(0.5, 0.5)) is None


def test_a_paraphrased_name_stands_short_of_the_votes_overruling_it() -> None:
    """A draft's exact name the question does not write ("place of birth" for "where is james brown from") is
    overruled as any other: only by the votes' :data:`~kifqa.pipeline.relations.OVERRULING_LEAD`."""
    p27 = Candidate(id="P27", label="country of citizenship", aliases=("nationality",))
    by_entity = {BROWN_1.id: [PropertyUse(property=P19, direction="forward"), PropertyUse(property=p27, direction="forward")]}
    votes = {("place of birth", "forward"): 0.3, ("country of citizenship", "forward"): 0.5}
    paraphrased = relations.options(Pattern("james brown", "place of birth", "?x"), _linking(BROWN_1), by_entity,
                                    question="where is james brown from", votes=votes)
    assert paraphrased[0].property.id == "P19" and relations.overruling(paraphrased) is None


def test_typos_still_rank_the_intended_property_first() -> None:
    p40 = Candidate(id="P40", label="child", aliases=("has child",))
    p50 = Candidate(id="P50", label="author", aliases=("writer",))
    by_entity = {BROWN_1.id: [PropertyUse(property=p50, direction="backward"), PropertyUse(property=p40, direction="forward")]}
    ranked = relations.options(Pattern("?x", "chid of", "james brown"), _linking(BROWN_1), by_entity)
    assert ranked[0].property.id == "P40" and relations.obvious(ranked) is None


def test_vague_predicate_goes_to_the_model_with_numbered_options() -> None:
    by_entity = {BROWN_1.id: [PropertyUse(property=P19, direction="forward"), PropertyUse(property=P20, direction="forward")]}
    pattern = Pattern("james brown", "hometown", "?x")
    ranked = relations.options(pattern, _linking(BROWN_1), by_entity)
    assert relations.obvious(ranked) is None
    req = relations.request("what is james brown's hometown", pattern, ranked)
    assert "Draft: (james brown | hometown | ?x)\nOptions:\n" in req.messages[1].content
    assert req.grammar == 'root ::= "1" | "2"'
    assert "1. (James Brown [American musician, aka Mr. Dynamite] | place of" in req.messages[1].content
    assert relations.parse("2", ranked) is ranked[1]


def test_the_model_is_shown_only_the_options_the_ranking_cannot_tell_apart() -> None:
    p27 = Candidate(id="P27", label="country of citizenship", aliases=(), description="")
    by_entity = {BROWN_1.id: [PropertyUse(property=p, direction="forward") for p in (P19, P20, p27, P175)]}
    ranked = relations.options(Pattern("james brown", "hometown", "?x"), _linking(BROWN_1), by_entity,
                               votes={("place of birth", "forward"): 0.45, ("place of death", "forward"): 0.45,
                                          ("country of citizenship", "forward"): 0.1})
    assert [o.property.id for o in ranked[:2]] == ["P19", "P20"] and ranked[0].score - ranked[2].score >= 0.1
    assert relations.obvious(ranked, lead=0.1) is None
    shown = relations.contenders(ranked, lead=0.1, most=12)
    assert [o.property.id for o in shown] == ["P19", "P20"]  # the other two trail the first by 0.1 or more
    assert relations.contenders(ranked, lead=None, most=3) == ranked[:3]
    assert relations.contenders(ranked, lead=1.0, most=1) == ranked[:1]


def test_options_similar_questions_do_not_ask_for() -> None:
    def option(pid: str, votes: float) -> relations.Option:
        return relations.Option((BROWN_1,), Candidate(id=pid, label=pid), "forward", 1.0, 1.0, votes)

    assert relations.unasked([option("P19", 0.05), option("P20", 0.3)])
    assert not relations.unasked([option("P19", relations.OVERRULED_BELOW), option("P20", 0.0)])
    assert not relations.unasked([option("P19", 0.0), option("P20", relations.OVERRULING)])
    assert not relations.unasked([])


def test_a_second_drafts_relation_replaces_a_kind_only_if_asked_for_more_and_the_same_way_round() -> None:
    def option(pid: str, direction: str, votes: float) -> relations.Option:
        return relations.Option((BROWN_1,), Candidate(id=pid, label=pid), direction, 0.5, 0.5, votes)

    occupation = option("P106", "backward", 0.30)
    assert relations.narrows(occupation, option("P19", "backward", 0.65))
    assert not relations.narrows(occupation, option("P19", "backward", 0.30))
    assert not relations.narrows(occupation, option("P272", "forward", 0.50))  # a film's company, not people


def test_direction_follows_the_real_statements() -> None:
    # drafted the wrong way round: the entity is really the value of P175
    by_entity = {BROWN_1.id: [PropertyUse(property=P175, direction="backward")]}
    ranked = relations.options(Pattern("james brown", "performer", "?x"), _linking(BROWN_1), by_entity)
    assert relations.obvious(ranked).direction == "backward"


def test_the_choice_prompt_reads_back_as_written() -> None:
    """The relation choice's format is defined once (RelationChoice): the request writes it, a model
    (the gold backend) reads it back, descriptions with parentheses and dashes included."""
    clyde = Candidate(id="Q1", label="Clyde (Missouri)", description="a city (in the US) — small", aliases=("c",))
    born = Candidate(id="P19", label="place of birth", description="most specific known (e.g. city) — location")
    shown = [relations.Option((clyde,), born, d, 0.0, 0.0) for d in ("forward", "backward")]
    request = relations.request("where was clyde born", Pattern("clyde", "born in", "?x"), shown)
    choice = RelationChoice.parse(request.messages[-1].content)
    assert choice is not None and str(choice) == request.messages[-1].content
    assert [(o.pattern.predicate, o.pattern.direction, o.gloss) for o in choice.options] == [
        ("place of birth", "forward", born.description), ("place of birth", "backward", born.description)]
    assert choice.options[0].pattern.subject == "Clyde (Missouri) [a city (in the US) — small, aka c]"


def test_values_the_question_does_not_ask_for_are_passed_over() -> None:
    """An identifier, a width or a date does not answer "who" or "where": such options are left out
    unless the question asks for that kind of value, the draft names the property, or nothing is left."""
    isni = Candidate(id="P213", label="ISNI", description="International Standard Name Identifier")
    width = Candidate(id="P2049", label="width", description="width of an object")
    dob = Candidate(id="P569", label="date of birth", description="date on which the subject was born")
    by_entity = {BROWN_1.id: [PropertyUse(property=P19, direction="forward", value_type="item"),
                              PropertyUse(property=isni, direction="forward", value_type="external_id"),
                              PropertyUse(property=width, direction="forward", value_type="quantity"),
                              PropertyUse(property=dob, direction="forward", value_type="time")]}

    def shown(predicate: str, question: str) -> list[str]:
        ranked = relations.options(Pattern("james brown", predicate, "?x"), _linking(BROWN_1), by_entity,
                                   question=question)
        return [o.property.id for o in ranked]

    assert shown("hometown", "what is james brown's hometown") == ["P19"]
    assert set(shown("birth", "when was james brown born")) == {"P19", "P569"}
    assert set(shown("height", "how tall is james brown")) == {"P19", "P2049"}
    assert "P213" in shown("ISNI", "what is james brown's isni")  # the draft names it
    only_ids = {BROWN_1.id: [PropertyUse(property=isni, direction="forward", value_type="external_id")]}
    assert [o.property.id for o in relations.options(Pattern("james brown", "code", "?x"), _linking(BROWN_1),
                                                     only_ids, question="who is james brown")] == ["P213"]
    assert relations.wanted_types("Who was born in Paris?") == relations.ENTITY_TYPES
    # the question words are English: a pool in another language reads none of them, and passes nothing over
    untyped = relations.options(Pattern("james brown", "hometown", "?x"), _linking(BROWN_1), by_entity,
                                question="what is james brown's hometown", typed=False)
    assert {o.property.id for o in untyped} == {"P19", "P213", "P2049", "P569"}


def test_near_match_namesakes_share_an_option() -> None:
    """Near matches that bear the same name are one option per (property, direction), as exact ones are."""
    real, twin = Candidate(id="Q1", label="Your Future Our Clutter"), Candidate(id="Q2", label="Your Future Our Clutter")
    other = Candidate(id="Q3", label="Our Bright Future")
    by_entity = {e.id: [PropertyUse(property=P175, direction="forward")] for e in (real, twin, other)}
    linking = Linking("future our clutter", [real, twin, other], [real, twin, other], False)
    ranked = relations.options(Pattern("future our clutter", "band", "?x"), linking, by_entity)
    assert [[e.id for e in o.entities] for o in ranked] == [["Q1", "Q2"], ["Q3"]]


def test_a_predicate_named_only_by_a_description_ranks_first() -> None:
    performer = Candidate(id="P175", label="performer", description="actor, musician, band or other performer")
    country = Candidate(id="P495", label="country of origin", description="country of origin of this item")
    by_entity = {BROWN_1.id: [PropertyUse(property=country, direction="forward"),
                              PropertyUse(property=performer, direction="forward")]}
    ranked = relations.options(Pattern("james brown", "band", "?x"), _linking(BROWN_1), by_entity)
    assert ranked[0].property.id == "P175" and ranked[0].match == relations.DESCRIPTION_MATCH
    assert relations.obvious(ranked) is None, "a description match still goes to the model"


def test_the_model_answers_one_of_the_shown_numbers() -> None:
    by_entity = {BROWN_1.id: [PropertyUse(property=P19, direction="forward"), PropertyUse(property=P20, direction="forward")]}
    pattern = Pattern("james brown", "hometown", "?x")
    ranked = relations.options(pattern, _linking(BROWN_1), by_entity)
    request = relations.request("what is james brown's hometown", pattern, ranked)
    assert request.grammar == 'root ::= "1" | "2"'
    assert relations.parse("2", ranked) is ranked[1]
    for answer in ("0", "3"):
        with pytest.raises(relations.ChoiceError):
            relations.parse(answer, ranked)


def test_the_better_named_near_match_outweighs_the_drafts_direction() -> None:
    """"a film directed by wiebke von carolsfeld", drafted the wrong way round: the best-named near match
    directs films (P57 backward); a less well named one is itself directed (P57 forward)."""
    wiebke, goethe = Candidate(id="Q2568216", label="Wiebke Carolsfeld"), Candidate(id="Q5879", label="Goethe")
    director = Candidate(id="P57", label="director")
    by_entity = {wiebke.id: [PropertyUse(property=director, direction="backward")],
                 goethe.id: [PropertyUse(property=director, direction="forward")]}
    linking = Linking("wiebke von carolsfeld", [wiebke, goethe], [wiebke, goethe], False)
    ranked = relations.options(Pattern("wiebke von carolsfeld", "director", "?x"), linking, by_entity)
    assert relations.obvious(ranked).relations() == [Relation("Q2568216", "P57", "backward")]


def test_every_relation_choice_shares_its_system_prompt_as_a_named_prefix() -> None:
    by_entity = {BROWN_1.id: [PropertyUse(property=P19, direction="forward"), PropertyUse(property=P20, direction="forward")]}
    pattern = Pattern("james brown", "hometown", "?x")
    ranked = relations.options(pattern, _linking(BROWN_1), by_entity)
    a = relations.request("what is james brown's hometown", pattern, ranked)
    b = relations.request("where did james brown die", pattern, ranked[:1])
    shared = relations.shared_prefix()
    assert a.prefix_key == b.prefix_key == shared.prefix_key == "relations"
    assert a.messages[:1] == b.messages[:1] == shared.messages[:1] and a.messages[1] != b.messages[1]
    assert a.prefix_messages is None and len(a.messages) == 2  # the prefix is the system prompt alone


def test_a_similarity_floor_keeps_every_value_that_reaches_it() -> None:
    pairs = [("chid", "child"), ("phillip pullman", "Philip Pullman"), ("place of birth", "place of death"),
             ("genre", "director"), ("authr", "author"), ("birth place", "place of birth")]
    for text, label in pairs:
        full, floored = similarity(text, label), similarity(text, label, floor=SPELLING_MATCH)
        assert floored <= full and (floored == full or full < SPELLING_MATCH), (text, label)
    assert similarity("chid", "child", floor=SPELLING_MATCH) >= SPELLING_MATCH
    assert similarity("genre", "director", floor=SPELLING_MATCH) < similarity("genre", "director")  # not compared


def test_the_entity_a_question_names_is_masked_however_it_is_written() -> None:
    assert masked("What was bill hosket, jr.'s position", "bill hosket jr") == "What was it.'s position"
    assert masked("where was Café Tacuba formed", "cafe tacuba") == "where was it formed"
    assert masked("who is the parent of bob woodward?", "Bob Woodward") == "who is the parent of it?"
    assert masked("who wrote the bob", "bob woodward") is None


def test_the_namesakes_taking_the_question_s_article() -> None:
    club, the_club = Candidate(id="Q1", label="Suicide Club"), Candidate(id="Q2", label="The Suicide Club")
    assert article_takers("Which film genre is The Suicide Club under", "suicide club", [club, the_club]) == {"Q2"}
    assert article_takers("which film genre is suicide club under", "suicide club", [club, the_club]) == {"Q1"}
    assert article_takers("what genre is it", "suicide club", [club, the_club]) is None  # no such run written
