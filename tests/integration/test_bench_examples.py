"""``kifqa bench examples`` end to end on the local base with the zero-cost gold model."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from kifqa.bench.examples import examples


def rows(output: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in output.splitlines()
            if re.match(r"(fixed|retrieved|clustered) +\d", line)}


def test_the_modes_side_by_side_then_replayed_from_the_record_cache(settings, built_kb, tmp_path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"KIFQA_DATA_DIR": str(settings.data_dir), "KIFQA_CACHE_DIR": str(settings.cache_dir),
                        "KIFQA_LLM__BACKEND": "gold",
                        "KIFQA_LLM__CACHE": str(tmp_path / "llm.sqlite"), "KIFQA_EXAMPLES__POOL_LIMIT": "300",
                        "KIFQA_EXAMPLES__CLUSTERS": "4"}.items():
        monkeypatch.setenv(name, value)
    options = ["--start", "200", "--limit", "3", "--modes", "fixed,clustered"]
    first = CliRunner().invoke(examples, options)
    assert first.exit_code == 0, first.output
    table = rows(first.output)
    assert set(table) == {"fixed", "clustered"}
    for n, f1, *_, replayed in table.values():
        assert (n, f1, replayed) == ("3", "1.000", "0%")  # the gold model drafts every question right
    again = rows(CliRunner().invoke(examples, options).output)
    assert [r[-1] for r in again.values()] == ["100%", "100%"]  # every call replayed the second time
