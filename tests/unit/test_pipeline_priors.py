"""The example pool's priors: each convention counted where its rule would act, right (shows) or wrong (against),
and a rule's switch on only where its prior holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kifqa.config import PipelineSettings
from kifqa.data.pool import Example, sdbqa_pool, sqwd_pool
from kifqa.examples.priors import PoolPriors, Prior, pool_priors
from kifqa.types import Convention


def example(question: str, topic: str, *names: str) -> Example:
    return Example(question, f"({topic} | p | ?x)", names)


#: For each convention, a pool that shows it and one that goes against it.
POOLS = {
    Convention.COMMA: ([example("which county is orlando, florida located in", "orlando")],
                       [example("where is the tv program, catscratch, from?", "catscratch")]),
    Convention.OFFERED: ([example("is sandro puppo male or female", "sandro puppo")],
                         [example("who was born first, john lennon or paul mccartney", "john lennon")]),
    Convention.ARTICLE: ([example("what language is the guns in?", "the guns", "The Guns"),
                          example("where was guns released?", "guns", "Guns")],
                         [example("what language is the guns in?", "the guns", "Guns"),
                          example("where was guns released?", "guns", "The Guns")]),
    Convention.HANDLE: ([example("what music genre is granddrive1?", "Grand Drive", "Grand Drive")],
                        [example("what is area51 famous for", "Area 51", "Area 51")]),
}


@pytest.mark.parametrize("convention", list(Convention))
def test_a_pool_that_shows_a_convention_bears_it_out_and_one_that_goes_against_it_does_not(
        convention: Convention) -> None:
    shows, against = POOLS[convention]
    assert pool_priors(shows).prior(convention) == Prior(len(shows), 0)
    assert pool_priors(against).prior(convention) == Prior(0, len(against))
    assert pool_priors(shows + against).prior(convention).share == 0.5


def test_questions_a_rule_would_not_act_on_count_for_no_convention() -> None:
    plain = [example("where was james brown born", "james brown", "James Brown"),
             example("who directed the matrix", "the matrix", "The Matrix"),  # no namesake without the article
             example("which album did m83 make", "m83", "M83")]  # the digits are the name's, as written
    assert pool_priors(plain) == PoolPriors(questions=3)


def test_without_the_topic_s_names_the_article_and_handle_are_not_counted() -> None:
    for convention in (Convention.ARTICLE, Convention.HANDLE):
        bare = [Example(e.question, e.draft) for e in POOLS[convention][0]]
        assert pool_priors(bare).prior(convention) == Prior()


@pytest.mark.parametrize(("prior", "share", "least", "holds"), [
    (Prior(3, 1), 0.5, 1, True), (Prior(1, 3), 0.5, 1, False), (Prior(2, 0), 0.5, 3, False),
    (Prior(), 0.5, 1, False), (Prior(), 0.0, 0, True)])
def test_a_prior_holds_from_a_share_and_a_count(prior: Prior, share: float, least: int, holds: bool) -> None:
    assert prior.holds(share=share, least=least) is holds


def test_the_simplequestions_pool_bears_out_every_convention(data_dir: Path) -> None:
    """The rules were written for SimpleQuestions: its training questions turn every one of them on."""
    priors, s = pool_priors(sqwd_pool(data_dir)), PipelineSettings()
    assert all(priors.prior(c).holds(share=s.prior_share, least=s.prior_least) for c in Convention)
    assert priors.comma.against > 0 and priors.offered.against > 0, "both kinds of questions are counted"


def test_one_example_that_shows_a_convention_does_not_turn_it_on(data_dir: Path) -> None:
    """SimpleDBpediaQA's pool writes one name before a comma that qualifies it: not its convention."""
    priors, s = pool_priors(sdbqa_pool(data_dir)), PipelineSettings()
    assert priors.comma == Prior(1, 0)
    held = {c for c in Convention if priors.prior(c).holds(share=s.prior_share, least=s.prior_least)}
    assert held == {Convention.OFFERED}  # shown by 8 of its questions
    assert Prior(2, 0).holds(share=s.prior_share, least=s.prior_least)
