"""``kifqa bench llm`` end to end on the 0.5B model (slow: two passes over real llama.cpp)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from kifqa.bench.llm import llm

pytest.importorskip("xllamacpp")


@pytest.mark.slow
def test_the_prefix_cache_pays_off_on_the_pipelines_draft_prompt() -> None:
    result = CliRunner().invoke(llm, ["--model", "qwen2.5-coder-0.5b", "--questions", "2", "--examples", "fixed",
                                       "--slots", "1,2"])
    assert result.exit_code == 0, result.output
    assert "draft prompts with fixed examples" in result.output
    tokens = int(re.search(r"examples, ~(\d+) tokens", result.output).group(1))
    assert 250 <= tokens <= 600
    off = re.search(r"no prefix cache .*?(\d+)%", result.output).group(1)
    on = re.search(r"\nprefix cache .*?(\d+)%", result.output).group(1)
    assert off == "0" and int(on) > 80
    ratios = result.output.split("ratio (on/off)")[1].splitlines()[0]
    cpu = float(re.findall(r"([\d.]+)x", ratios)[-1])
    assert cpu > 2  # CPU time per question: the cache's saving, whatever else runs on the machine
    slots = re.findall(r"^ +(\d) slot\(s\) +([\d.]+) s/request", result.output, re.M)
    assert [n for n, _ in slots] == ["1", "2"] and all(float(s) > 0 for _, s in slots)
