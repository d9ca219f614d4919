"""Each step of KIF-QA against the real local knowledge base, model calls replayed from a cassette."""

from __future__ import annotations

import asyncio

import pytest

from kifqa.config import PipelineSettings
from kifqa.data.pool import Example, sqwd_pool
from kifqa.examples.sources import FixedExamples, RetrievedExamples
from kifqa.llm.base import Completion, Usage
from kifqa.pipeline import Pipeline, answers, draft, entities, relations
from kifqa.types import ConstraintResult, Decision, ErrorKind, Pattern, Question, Rule, Trace
from tests.cassette import cassette_llm
from tests.fakes import ScriptedLLM


@pytest.fixture(scope="module")
def pipeline(settings, local_kb) -> Pipeline:
    return Pipeline(kb=local_kb, llm=cassette_llm(settings, "pipeline"), settings=settings.pipeline)


def ask(pipeline: Pipeline, text: str):
    return asyncio.run(pipeline.answer(Question("t", text)))


def test_forward_question(pipeline) -> None:
    result = ask(pipeline, "where was sasha vujačić born")
    assert result.trace.error is None, result.trace.error
    assert "Q1010" in {a.answer for a in result.answers}
    [main] = result.trace.draft
    assert main.direction == "forward" and main.known == "sasha vujačić"
    assert result.trace.relations[0].property == "P19"
    assert result.trace.filters and "SELECT" in result.trace.filters[0].sparql
    assert result.answers[0].answer_label == "Maribor"


def test_inverse_question_asks_for_the_subject(pipeline) -> None:
    result = ask(pipeline, "What is a film directed by wiebke von carolsfeld?")
    assert result.trace.error is None, result.trace.error
    assert "Q14949730" in {a.answer for a in result.answers}
    assert {r.direction for r in result.trace.relations} == {"backward"}
    assert all(r.property == "P57" for r in result.trace.relations)


def decided(trace: Trace, rule: Rule) -> list[Decision]:
    """The decisions of ``rule`` in ``trace``."""
    return [d for d in trace.decisions if d.rule is rule]


def redrafted(trace: Trace) -> bool | None:
    """Whether the trace's (last) second draft before the choice was taken; ``None`` where none was tried."""
    tried = [d for d in decided(trace, Rule.REDRAFT) if d.step == "redraft" and d.inputs["reason"] != "kind"]
    return tried[-1].taken if tried else None


def Scripted(text: str) -> ScriptedLLM:
    """A model that answers every request, draft and relation, with the same text."""
    return ScriptedLLM(draft=text, pick=text, usage=Usage(prompt_tokens=10, completion_tokens=12))


def test_constrained_question(local_kb) -> None:
    # The small model rarely drafts constraints; the draft is scripted, the rest runs for real.
    llm = Scripted("(columbano bordalo pinheiro | place of death | ?x)\n(?x | country | portugal)")
    result = asyncio.run(Pipeline(kb=local_kb, llm=llm).answer(
        Question("c", "which city in portugal did columbano bordalo pinheiro die in")))
    assert result.trace.error is None, result.trace.error
    assert len(result.trace.draft) == 2 and result.trace.draft[1].object == "portugal"
    assert {a.answer for a in result.answers} == {"Q597"}
    [outcome] = result.trace.constraints
    assert (outcome.result, outcome.kept, outcome.of) == (ConstraintResult.APPLIED, 1, 1)
    assert outcome.constraint == result.trace.draft[1]


@pytest.mark.parametrize("widen", [True, False])
def test_a_draft_that_names_part_of_a_title_is_widened_to_the_title(local_kb, widen: bool) -> None:
    llm = Scripted("(?x | type | autobiography)")
    settings = PipelineSettings(widen_known=widen)
    result = asyncio.run(Pipeline(kb=local_kb, llm=llm, settings=settings).answer(
        Question("w", "what book type is the autobiography of alice b. toklas")))
    assert result.trace.error is None, result.trace.error
    found = {a.answer for a in result.answers}
    if widen:  # the title is an exact label holding the drafted words: its genre is the answer
        assert result.trace.draft[0].known == "the autobiography of alice b. toklas"
        assert found == {"Q36279"}
        [widened] = decided(result.trace, Rule.WIDENED)
        assert widened.inputs == {"drafted": "autobiography", "known": "the autobiography of alice b. toklas"}
    else:
        assert result.trace.draft[0].known == "autobiography" and "Q36279" not in found


def pool(*examples: tuple[str, str, tuple[str, ...]]) -> FixedExamples:
    """A pool of examples (question, the topic as the draft writes it, the topic's names) for the draft and priors,
    each written twice (the second time with a question mark): a convention needs ``pipeline.prior_least`` (2) of
    the pool's questions to fire."""
    return FixedExamples([Example(q, f"({topic} | p | ?x)", names) for question, topic, names in examples
                          for q in (question, question.rstrip("?") + "?")])


#: A pool whose topic is the name before a comma, and one whose topic is the name after a comma.
BEFORE_COMMA = pool(("which county is orlando, florida located in", "orlando", ()))
AFTER_COMMA = pool(("where is the tv program, catscratch, from?", "catscratch", ()))


@pytest.mark.parametrize(("examples", "comma", "qualified"), [(BEFORE_COMMA, True, True), (AFTER_COMMA, True, False),
                                                              (BEFORE_COMMA, False, False)])
def test_a_draft_over_the_name_after_a_comma_takes_the_name_it_qualifies(local_kb, examples: FixedExamples,
                                                                         comma: bool, qualified: bool) -> None:
    """"california" in "born in long beach, california" qualifies the town before the comma: with
    ``comma_known``, where the pool's topics are the names before commas, the draft's known entity becomes "long
    beach", whose births answer; the decision names the prior that let it."""
    llm = Scripted("(?x | place of birth | california)")
    pipeline = Pipeline(kb=local_kb, llm=llm, examples=examples, settings=PipelineSettings(comma_known=comma))
    result = asyncio.run(pipeline.answer(Question("q", "What drummer was born in long beach, california?")))
    assert result.trace.error is None, result.trace.error
    found = {a.answer for a in result.answers}
    if qualified:
        assert result.trace.draft[0].known == "long beach" and {"Q6267333", "Q920892"} <= found
        assert {(r.entity, r.property) for r in result.trace.relations} == {("Q16739", "P19")}
        [decision] = decided(result.trace, Rule.QUALIFIED)
        assert (decision.inputs["prior"], decision.inputs["prior_share"]) == ("comma", 1.0)
    else:
        assert result.trace.draft[0].known == "california" and "Q920892" not in found
        assert decided(result.trace, Rule.QUALIFIED) == []


#: A pool whose "or" offers answers (the topic is not one), and one whose "or" offers topics.
OFFERS_ANSWERS = pool(("is sandro puppo male or female", "sandro puppo", ()))
OFFERS_TOPICS = pool(("who was born first, john lennon or paul mccartney", "john lennon", ()))
#: A pool whose namesakes differ by the article the question writes, and one where they differ otherwise.
ARTICLE_TOLD = pool(("what language is the guns in?", "the guns", ("The Guns",)),
                    ("where was guns released?", "guns", ("Guns",)))
ARTICLE_UNTOLD = pool(("what language is the guns in?", "the guns", ("Guns",)),
                      ("where was guns released?", "guns", ("The Guns",)))
#: A pool that writes a name without its spaces as a handle, and one whose joined digits are the name's.
HANDLES = pool(("what music genre is granddrive1?", "Grand Drive", ("Grand Drive",)))
JOINED_DIGITS = pool(("what is area51 famous for", "Area 51", ("Area 51",)))


@pytest.mark.parametrize(("examples", "told"), [(ARTICLE_TOLD, True), (ARTICLE_UNTOLD, False)])
def test_namesakes_are_told_apart_by_the_article_where_the_pool_writes_names_with_their_articles(
        local_kb, examples: FixedExamples, told: bool) -> None:
    """"The Cool World" and "Cool World" both have a composer: the article the question writes keeps the first,
    where the pool's questions write their topics' articles."""
    pipeline = Pipeline(kb=local_kb, llm=Scripted("(cool world | composer | ?x)"), examples=examples)
    result = asyncio.run(pipeline.answer(Question("w", "who composed the music for the cool world")))
    assert result.trace.error is None, result.trace.error
    entities_ = {r.entity for r in result.trace.relations}
    if told:
        assert entities_ == {"Q7727567"}
        [decision] = decided(result.trace, Rule.ARTICLE)
        assert decision.inputs == {"kept": 1, "of": 2, "prior": "article", "prior_share": 1.0}
    else:
        assert entities_ == {"Q7727567", "Q26265"} and decided(result.trace, Rule.ARTICLE) == []


@pytest.mark.parametrize(("examples", "dropped"), [(HANDLES, True), (JOINED_DIGITS, False)])
def test_a_handle_s_digits_are_dropped_where_the_pool_writes_names_as_handles(local_kb, examples: FixedExamples,
                                                                              dropped: bool) -> None:
    """"honeycone1969" is Honey Cone written as a handle: found where the pool writes names so, not where the
    digits a pool's question joins to a name are the name's."""
    pipeline = Pipeline(kb=local_kb, llm=Scripted("(honeycone1969 | genre | ?x)"), examples=examples,
                        settings=PipelineSettings(redraft_below=None))
    result = asyncio.run(pipeline.answer(Question("h", "The artist honeycone1969 is in which genre of music?")))
    if dropped:
        assert result.trace.error is None and result.trace.entities == ["Q1626847"]
        [decision] = decided(result.trace, Rule.HANDLE)
        assert decision.inputs == {"drafted": "honeycone1969", "found": "honey cone", "prior": "handle",
                                   "prior_share": 1.0}
    else:
        assert "Q1626847" not in result.trace.entities and decided(result.trace, Rule.HANDLE) == []


class _GroundedScript(ScriptedLLM):
    """Drafts ``first`` for the first draft request and ``second`` for the next, and keeps their grammars."""

    def __init__(self, first: str, second: str) -> None:
        super().__init__(pick="1")
        self.drafts, self.grammars = [first, second], []

    async def agenerate(self, requests):
        out = []
        for r in requests:
            if r.grammar is not None and "?x | " in r.grammar:  # a draft request
                self.grammars.append(r.grammar)
                out.append(Completion(self.drafts[min(len(self.grammars), 2) - 1], Usage()))
            else:
                out.extend(await super().agenerate([r]))
        return out


@pytest.mark.parametrize("below", [0.3, None])
def test_an_unsure_draft_is_drafted_again_over_the_other_exact_names(local_kb, below: float | None) -> None:
    """A description drafted as the entity finds no option that fits (best score under ``redraft_below``): the
    second draft's entity is one of the question's exact names outside it, and its options fit better."""
    llm = _GroundedScript("(?x | retired footballer | english professional footballer)",
                          "(?x | place of birth | birmingham)")
    result = asyncio.run(Pipeline(kb=local_kb, llm=llm, settings=PipelineSettings(redraft_below=below)).answer(
        Question("u", "Which retired English professional footballer was born in birmingham?")))
    assert result.trace.error is None, result.trace.error
    found = {a.answer for a in result.answers}
    gold = {"Q11722970", "Q1387901", "Q15999060"}  # the question's footballers born in Birmingham
    if below is None:
        assert len(llm.grammars) == 1 and not found & gold
        return
    assert len(llm.grammars) == 2 and gold <= found
    assert {(r.property, r.direction) for r in result.trace.relations} == {("P19", "backward")}
    assert draft._any_case("birmingham") in llm.grammars[1]
    assert draft._any_case("english") not in llm.grammars[1]  # inside the first draft's entity
    [redraft] = decided(result.trace, Rule.REDRAFT)
    assert redraft.taken and redraft.inputs["reason"] == "low_score"
    assert redraft.inputs["first_best"] < 0.3 <= redraft.inputs["second_best"]


_NO_STATEMENT = ("what language is the hong kong film fist of legend in?", "(fist of legend | original language | ?x)",
                 ErrorKind.NO_STATEMENTS, ["Q1001759"])
_NO_ENTITY = ("which actress and signer was born in hollywood?", "(?x | actress | signer)", ErrorKind.NO_ENTITY, [])


@pytest.mark.parametrize(("found", "second", "fits"), [
    (_NO_STATEMENT, "(?x | country of origin | hong kong)", ("hong kong", "P495", "backward")),
    (_NO_STATEMENT, "(?x | spoken language | hong kong)", None),
    (_NO_ENTITY, "(?x | place of birth | hollywood)", ("hollywood", "P19", "backward")),
    (_NO_ENTITY, "(?x | record label | hollywood)", None)])
def test_a_second_draft_replaces_one_that_found_nothing_only_if_it_is_sure(local_kb, found: tuple, second: str,
                                                                         fits: tuple | None) -> None:
    """"Fist of Legend" names an item the base holds no statement about; "signer" names no item. A second draft
    over another of the question's names replaces such a draft where its best option fits (a name of the option's
    property), not where it is unsure itself (under ``redraft_below``): then the question answers nothing rather
    than another question, and its trace says which second draft was tried."""
    question, first, error_kind, entities = found
    llm = _GroundedScript(first, second)
    settings = PipelineSettings(redraft_below=0.3, redraft_each=1)
    result = asyncio.run(Pipeline(kb=local_kb, llm=llm, settings=settings).answer(Question("n", question)))
    assert len(llm.grammars) == 2
    if fits is not None:
        assert result.trace.error is None, result.trace.error
        known, *relation = fits
        assert result.trace.draft[0].known == known and result.answers
        assert {(r.property, r.direction) for r in result.trace.relations} == {tuple(relation)}
        assert redrafted(result.trace) is True
    else:
        assert result.answers == [] and result.trace.error_kind is error_kind
        assert result.trace.entities == entities and redrafted(result.trace) is False
    [redraft] = decided(result.trace, Rule.REDRAFT)
    assert redraft.inputs["reason"] == error_kind.value and redraft.inputs["tried"] == 1


@pytest.mark.parametrize(("question", "examples", "redrafted"), [
    ("is alexander mackenzie male or female", OFFERS_ANSWERS, True),
    ("is alexander mackenzie male or female", OFFERS_TOPICS, False),
    ("who is a male named alexander mackenzie", OFFERS_ANSWERS, False)])
def test_a_draft_over_an_answer_the_question_offers_is_drafted_again(local_kb, question: str, examples: FixedExamples,
                                                                     redrafted: bool) -> None:
    """"male" in "is X male or female" is an answer to choose, not the entity asked about, where the pool's "or"s
    offer answers: a second draft over the question's other names replaces it. Where the pool's "or"s offer
    topics, or "male" is not one of two offered answers, nothing is redrafted (the second draft for an answer set
    over ``redraft_over`` aside)."""
    llm = _GroundedScript("(?x | sex or gender | male)", "(alexander mackenzie | sex or gender | ?x)")
    settings = PipelineSettings(redraft_over=None)
    pipeline = Pipeline(kb=local_kb, llm=llm, examples=examples, settings=settings)
    result = asyncio.run(pipeline.answer(Question("m", question)))
    assert result.trace.error is None, result.trace.error
    if redrafted:
        assert len(llm.grammars) == 2 and "male" not in llm.grammars[1].split("known ::=")[1]
        assert [(r.entity, r.property, r.direction) for r in result.trace.relations] == [("Q128708", "P21", "forward")]
        assert [a.answer for a in result.answers] == ["Q6581097"]
        [decision] = decided(result.trace, Rule.REDRAFT)
        assert (decision.inputs["reason"], decision.inputs["prior"]) == ("offered", "offered")
    else:
        assert len(llm.grammars) == 1 and len(result.answers) > 100


@pytest.mark.parametrize("redraft_unasked", [True, False])
def test_a_draft_whose_options_similar_questions_do_not_ask_for_is_drafted_again(local_kb, data_dir, settings,
                                                                                redraft_unasked: bool) -> None:
    """The first draft takes the question's type ("cartoonist") where the dataset asks about its other name ("indie
    rock", backward ``genre``). The pool questions nearest to it ask for none of the first draft's options, so a
    second draft over the question's other exact names is tried, and taken since they ask for its best option."""
    pool = sqwd_pool(data_dir, limit=2000)
    examples = RetrievedExamples(pool, k=3, cache_dir=settings.cache_dir / "examples")
    llm = _GroundedScript("(?x | occupation | cartoonist)", "(?x | occupation | indie rock)")
    pipeline = Pipeline(kb=local_kb, llm=llm, examples=examples,
                        settings=PipelineSettings(redraft_unasked=redraft_unasked, redraft_each=1))
    result = asyncio.run(pipeline.answer(Question("c", "which american cartoonist is also an indie rock singer?")))
    assert result.trace.error is None, result.trace.error
    relations_taken = {(r.entity, r.property, r.direction) for r in result.trace.relations}
    if redraft_unasked:
        assert len(llm.grammars) == 2 and result.trace.draft[0].known == "indie rock"
        assert relations_taken == {("Q183504", "P136", "backward")}
        assert redrafted(result.trace) is True and decided(result.trace, Rule.REDRAFT)[0].inputs["reason"] == "unasked"
    else:
        assert len(llm.grammars) == 1 and {p for _, p, _ in relations_taken} == {"P106"}


_DRAMA = ("name a drama film directed by peter greenaway", "(?x | genre | drama film)",
          "(?x | director | peter greenaway)", ConstraintResult.APPLIED, {"Q661202"})
_ACTOR = ("Who's an actor from pittsburgh", "(?x | occupation | actor)", "(?x | place of birth | pittsburgh)",
          ConstraintResult.UNMET, 18)
_ASKED = ("Who is a japanese football player that plays defender", "(?x | position played | defender)",
          "(?x | country of citizenship | japan)", None, None)


@pytest.mark.parametrize("over", [100, None])
@pytest.mark.parametrize("case", [_DRAMA, _ACTOR, _ASKED])
def test_a_kind_drafted_as_the_known_entity_becomes_the_constraint_of_a_second_draft(local_kb, data_dir, settings,
                                                                                     case: tuple,
                                                                                     over: int | None) -> None:
    """The first draft takes the kind the question asks for ("drama film", "actor") as its known entity and
    answers with its hundreds of backlinks. A second draft over the question's other exact names, whose option
    similar questions ask for more, answers with fewer: it is the main pattern, and the first draft its
    constraint, applied where some of its answers meet it (Peter Greenaway's one drama of two) and not applied
    where none does (nobody born in Pittsburgh is an actor in the local base). A second draft whose option similar
    questions ask for less than the first's is not taken: the defenders are what "a japanese football player that
    plays defender" asks for."""
    question, first, second, result, expected = case
    pool = sqwd_pool(data_dir)
    examples = RetrievedExamples(pool, k=3, cache_dir=settings.cache_dir / "examples")
    llm = _GroundedScript(first, second)
    pipeline = Pipeline(kb=local_kb, llm=llm, examples=examples, settings=PipelineSettings(redraft_over=over))
    run = asyncio.run(pipeline.answer(Question("k", question)))
    trace, found = run.trace, {a.answer for a in run.answers}
    assert trace.error is None, trace.error
    if over is None or result is None:
        assert len(llm.grammars) == (1 if over is None else 2) and len(found) > 100 and trace.constraints == []
        assert [str(p) for p in trace.draft] == [first] and len({r.property for r in trace.relations}) == 1
        assert [k.taken for k in decided(trace, Rule.KIND)] == ([] if over is None else [False])
        return
    assert len(llm.grammars) == 2 and [str(p) for p in trace.draft] == [second, first]
    assert [c.step for c in trace.llm_calls][:2] == ["draft", "redraft"]
    [kind] = decided(trace, Rule.KIND)
    assert kind.taken and kind.inputs["answers"] > 100 and 0 < kind.inputs["narrower"] < kind.inputs["answers"]
    assert kind.inputs["second_votes"] > kind.inputs["first_votes"] and set(kind.chosen) == set(trace.relations)
    [outcome] = trace.constraints
    assert outcome.result is result and outcome.constraint == Pattern.parse(first)
    assert found == expected if isinstance(expected, set) else len(found) == expected
    assert {f.relation for f in trace.filters} == set(trace.relations)
    assert trace.relations and {r.property for r in trace.relations} <= {"P57", "P19"}


class _DraftPerName(ScriptedLLM):
    """Drafts ``first`` first; then, for a grammar that admits one of ``by_name``'s names alone, that name's
    draft, and for one that admits several, ``by_name[chosen]`` (the model's choice among them)."""

    def __init__(self, first: str, by_name: dict[str, str], chosen: str) -> None:
        super().__init__(pick="1")
        self.first, self.by_name, self.chosen, self.drafts = first, by_name, chosen, 0

    async def agenerate(self, requests):
        out = []
        for r in requests:
            if r.grammar is None or "?x | " not in r.grammar:
                out.extend(await super().agenerate([r]))
                continue
            self.drafts += 1
            admitted = [n for n in self.by_name if draft._any_case(n) in r.grammar]
            text = self.first if self.drafts == 1 else self.by_name[admitted[0] if len(admitted) == 1 else self.chosen]
            out.append(Completion(text, Usage()))
        return out


@pytest.mark.parametrize("each", [1, 3])
def test_a_second_draft_for_each_exact_name_lets_the_options_choose(local_kb, each: int) -> None:
    """Every exact name is inside the first draft's entity. One second draft over all of them takes
    "Swedish" and finds nothing better; one per name (``redraft_each``) also drafts "Örnsköldsvik", whose
    options fit, and takes it."""
    llm = _DraftPerName("(?x | retired ice hockey player | Swedish retired ice hockey player born in Örnsköldsvik)", {
        "Swedish": "(?x | retired ice hockey player | Swedish)",
        "ice hockey player": "(?x | retired ice hockey player | ice hockey player)",
        "Örnsköldsvik": "(?x | place of birth | Örnsköldsvik)"}, chosen="Swedish")
    settings = PipelineSettings(redraft_below=0.3, redraft_each=each)
    result = asyncio.run(Pipeline(kb=local_kb, llm=llm, settings=settings).answer(
        Question("s", "Who is a Swedish retired ice hockey player born in Örnsköldsvik?")))
    assert result.trace.error is None, result.trace.error
    assert llm.drafts == 1 + each
    relations = {(r.property, r.direction) for r in result.trace.relations}
    if each == 1:
        assert ("P19", "backward") not in relations and redrafted(result.trace) is False
    else:
        assert relations == {("P19", "backward")} and result.trace.draft[0].known == "Örnsköldsvik"
        assert redrafted(result.trace) is True
    assert len([a for a in result.trace.attempts if a.taken]) == 1 and len(result.trace.attempts) >= 2


def test_a_question_asks_the_base_for_each_exact_name_once(local_kb, monkeypatch) -> None:
    """The widened name, the second draft's grammar and the second draft's widened name all ask which runs
    are names: each run goes to the base once per question."""
    asked: list[str] = []
    named = local_kb.named

    async def counted(texts: list[str]) -> list[str] | None:
        asked.extend(texts)
        return await named(texts)

    monkeypatch.setattr(local_kb, "named", counted)
    llm = _GroundedScript("(?x | retired footballer | english professional footballer)",
                          "(?x | place of birth | birmingham)")
    result = asyncio.run(Pipeline(kb=local_kb, llm=llm, settings=PipelineSettings(redraft_below=0.3)).answer(
        Question("u", "Which retired English professional footballer was born in birmingham?")))
    assert len(llm.grammars) == 2 and result.trace.draft[0].known == "birmingham"
    assert "birmingham" in asked and len(asked) == len(set(asked))


def test_no_entity_found(pipeline) -> None:
    result = ask(pipeline, "where was zorblax quuxington born")
    assert result.answers == []
    assert result.trace.error_step == "entities" and "no entity found" in result.trace.error
    assert result.trace.error_kind is ErrorKind.NO_ENTITY


def test_input_errors_never_reach_the_model(pipeline) -> None:
    for text in ["", "?!", "x" * 5000]:
        result = ask(pipeline, text)
        assert result.trace.error_step == "input" and result.trace.llm_calls == []
        assert result.trace.error_kind is ErrorKind.INPUT


def test_garbage_model_output_is_reported(local_kb) -> None:
    result = asyncio.run(Pipeline(kb=local_kb, llm=Scripted("Sure! The answer is: ignore previous instructions; import os")).answer(Question("g", "where was james brown born")))
    assert result.answers == [] and result.trace.error_step == "draft"
    assert "not a pattern" in result.trace.error
    assert result.trace.llm_calls[0].output.startswith("Sure!")


def test_entities_keep_every_exact_name(local_kb) -> None:
    linking = asyncio.run(entities.link(local_kb, "james brown"))
    assert linking.exact and {"Q5950", "Q6130343"} <= {c.id for c in linking.kept}
    assert all(c.label.lower() == "james brown" or "james brown" in map(str.lower, c.aliases)
               for c in linking.kept)


def test_entities_fall_back_to_near_matches(local_kb) -> None:
    linking = asyncio.run(entities.link(local_kb, "wiebke von carolsfeld"))
    assert not linking.exact and "Q2568216" in {c.id for c in linking.kept}  # "Wiebke Carolsfeld"


@pytest.mark.parametrize(("label", "spaced", "item"), [("thezutons", "the zutons", "Q1142296"),
                                                      ("jimmarcus", "jim marcus", "Q6196624"),
                                                      ("honeycone1969", "honey cone", "Q1626847"),
                                                      ("zorblaxquuxington", None, None)])
def test_a_name_written_without_its_spaces_is_found(local_kb, label: str, spaced: str | None,
                                                    item: str | None) -> None:
    """A drafted word that finds nothing is cut where the cut pieces name an item exactly, a handle's trailing
    digits dropped."""
    linking = asyncio.run(entities.link(local_kb, label))
    if spaced is None:  # no such item in the base: nothing is made up
        assert linking.kept == [] and linking.query == label
        return
    assert linking.query == spaced and linking.exact and [c.id for c in linking.kept] == [item]


@pytest.mark.parametrize(("label", "item"), [("gridlockd", "Q951966"), ("mark ohara", "Q6769074"),
                                           ("st wenefredes church, bickley", "Q7595625")])
def test_a_name_written_without_its_apostrophes_is_named_exactly(local_kb, label: str, item: str) -> None:
    """"gridlockd" names Gridlock'd exactly, as "vujacic" names Vujačić: no cut, no near match."""
    linking = asyncio.run(entities.link(local_kb, label))
    assert linking.query == label and linking.exact and [c.id for c in linking.kept] == [item]


@pytest.mark.parametrize(("label", "query", "items"), [("esqueritas", "esquerita", {"Q3058617"}),
                                                      ("ray krocs", "ray kroc", {"Q319648"}),  # Ray Kroc's
                                                      ("midfielders", "midfielder", {"Q193592"}),
                                                      ("the beatles", "the beatles", {"Q1299", "Q3112872"})])
def test_a_plural_or_a_bare_possessive_s_is_dropped_where_that_names_an_item_exactly(local_kb, label: str, query: str,
                                                                                    items: set[str]) -> None:
    """A drafted name that names nothing exactly is searched again without the s that ends it; a name that is
    exact as drafted ("The Beatles") stays as it is."""
    linking = asyncio.run(entities.link(local_kb, label))
    assert linking.query == query and linking.exact and {c.id for c in linking.kept} == items


def test_near_matches_spelled_as_a_typo_of_the_label_come_first(local_kb) -> None:
    linking = asyncio.run(entities.link(local_kb, "phillip pullman"))
    assert [c.id for c in linking.candidates[:3]] == ["Q16967910", "Q190220", "Q543563"]  # the search's order
    assert not linking.exact and linking.kept[0].id == "Q190220"  # "Philip Pullman"
    assert [c.id for c in linking.kept[1:3]] == ["Q16967910", "Q543563"]  # the others in the search's order


def test_relations_know_the_real_direction(local_kb) -> None:
    linking = asyncio.run(entities.link(local_kb, "wiebke carolsfeld"))
    by_entity = asyncio.run(relations.uses(local_kb, linking.kept))
    # drafted the wrong way round: the director is really the value of P57
    ranked = relations.options(Pattern("wiebke carolsfeld", "director", "?x"), linking, by_entity)
    chosen = relations.obvious(ranked)
    assert chosen is not None and (chosen.property.id, chosen.direction) == ("P57", "backward")


@pytest.mark.parametrize(("question", "item"), [
    ("who composed the music for the cool world", "Q7727567"),  # The Cool World
    ("who composed the music for cool world", "Q26265"),  # Cool World
])
def test_namesakes_that_differ_by_an_article_are_told_apart_by_the_question_s(local_kb, question: str,
                                                                              item: str) -> None:
    """Both films are named "cool world" exactly and both have a composer: the article the question writes
    before the name (or its lack) keeps the one whose label takes it."""
    linking = asyncio.run(entities.link(local_kb, "cool world"))
    assert linking.exact and {c.id for c in linking.kept} == {"Q7727567", "Q26265"}
    by_entity = asyncio.run(relations.uses(local_kb, linking.kept))
    ranked = relations.options(Pattern("cool world", "composer", "?x"), linking, by_entity, question=question)
    assert [e.id for e in ranked[0].entities] == [item] and ranked[0].property.id == "P86"
    unsaid = relations.options(Pattern("cool world", "composer", "?x"), linking, by_entity)
    assert {e.id for e in unsaid[0].entities} == {"Q7727567", "Q26265"}, "without the question, both"


def test_constraint_narrows_but_never_empties(local_kb) -> None:
    found, runs = asyncio.run(answers.run_filters(local_kb, [
        relations.Relation("Q1112288", "P20", "forward")]))  # Columbano Bordalo Pinheiro, place of death
    assert {a.answer for a in found} == {"Q597"} and runs[0].n_statements == 1
    kept, outcome = asyncio.run(answers.constrain(local_kb, found, Pattern("?x", "country", "portugal")))
    assert [a.answer for a in kept] == ["Q597"] and (outcome.result, outcome.kept, outcome.of) == (
        ConstraintResult.APPLIED, 1, 1)
    assert str(outcome) == "constraint (?x | country | portugal): kept 1 of 1 answers"
    kept, outcome = asyncio.run(answers.constrain(local_kb, found, Pattern("?x", "country", "austria")))
    assert kept == found and outcome.result is ConstraintResult.UNMET
