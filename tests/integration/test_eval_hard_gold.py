"""A run over the hard base behind other endpoints (``kifqa bench standins --hard``) is scored against the hard
base's gold with ``kifqa eval --hard-gold``, as a ``--kb local-hard`` run is: the synthetic namesakes extend it."""

from __future__ import annotations

import pytest

from kifqa.cli.eval import gold_extender
from kifqa.config import Settings
from kifqa.eval.datasets import load_gold
from kifqa.kb.build import build
from kifqa.kb.hard import SYNTHETIC_BASE


def _synthetic(answers: set[str]) -> set[str]:
    return {a for a in answers if int(a[1:]) >= SYNTHETIC_BASE}


@pytest.mark.slow  # builds the hard base from the real data where it is not built (about a minute)
def test_hard_gold_extends_a_wikidata_runs_gold_with_the_hard_bases_namesakes(settings: Settings) -> None:
    build(settings, hard=True)
    questions = load_gold("sqwd:valid", settings.data_dir, limit=40)
    wikidata = settings.model_copy(update={"kb": settings.kb.model_copy(update={"spec": "wikidata"})})
    hard = settings.model_copy(update={"kb": settings.kb.model_copy(update={"spec": "local-hard"})})
    plain, forced, implied = (gold_extender(wikidata), gold_extender(wikidata, hard=True), gold_extender(hard))
    assert not plain.hard and forced.hard and implied.hard
    gained = [q for q in questions if _synthetic(forced.gold(q))]
    # the hard base adds synthetic answers to some questions' gold; the plain gold has none of them
    assert gained and not any(_synthetic(plain.gold(q)) for q in gained)
    assert all(forced.gold(q) == implied.gold(q) for q in questions)
