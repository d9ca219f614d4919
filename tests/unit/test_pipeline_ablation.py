"""The ablation's switches: each names real settings and really switches its rule off; the table compares each
variant with the defaults question by question; held-out questions are refused."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kifqa.cli import cli
from kifqa.config import PipelineSettings
from kifqa.eval.ablation import SWITCHES, _row, table
from kifqa.eval.datasets import GoldQuestion
from kifqa.eval.evaluation import Evaluation
from kifqa.eval.metrics import Score
from kifqa.eval.scoring import Scored
from kifqa.types import LLMCall, Question, Result, Trace


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_each_switch_changes_the_defaults(name: str) -> None:
    change = SWITCHES[name]
    switched = PipelineSettings(**change)  # an unknown or misspelt setting would not validate
    assert set(change) <= set(PipelineSettings.model_fields)
    assert switched != PipelineSettings()


def _evaluation(f1: dict[str, float], *, calls: int = 1, hits: int = 1) -> Evaluation:
    scored = []
    for qid, value in f1.items():
        trace = Trace(qid, qid)
        trace.llm_calls = [LLMCall(step="draft", cache_hit=i < hits) for i in range(calls)]
        gold = GoldQuestion(id=qid, text=qid, topic="Q1", property="P19", answer="Q2")
        scored.append(Scored(gold=gold, result=Result(Question(qid, qid), [], trace), expected={"Q2"},
                             score=Score(true_positives=int(value), predicted=1, gold=1), failure=None))
    return Evaluation(scored, 0.0)


def test_a_variant_row_counts_the_questions_it_changed() -> None:
    defaults = _evaluation({"a": 1.0, "b": 0.0, "c": 1.0})
    variant = _evaluation({"a": 0.0, "b": 1.0, "c": 1.0}, calls=2, hits=1)
    row = _row("local", "overruled", variant, defaults)
    assert (row.better, row.worse, row.f1_change, row.llm_calls, row.new_calls) == (1, 1, 0.0, 2.0, 3)
    assert "| local | overruled | 3 |" in table([_row("local", "", defaults, None), row])


def test_held_out_questions_are_refused() -> None:
    result = CliRunner().invoke(cli, ["ablate", "--start", "600", "--limit", "200"])
    assert result.exit_code == 2 and "held out" in result.output
