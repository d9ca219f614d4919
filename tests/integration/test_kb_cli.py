"""``kifqa kb ...`` end to end on the built base (the CLI reads KIFQA_DATA_DIR and KIFQA_CACHE_DIR)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from kifqa.cli.kb import kb
from kifqa.config import Settings
from kifqa.kb.build import BuiltKB


@pytest.fixture
def run(settings: Settings, built_kb: BuiltKB) -> Callable[..., Result]:
    env = {"KIFQA_DATA_DIR": str(settings.data_dir), "KIFQA_CACHE_DIR": str(settings.cache_dir)}
    return lambda *args: CliRunner().invoke(kb, list(args), env=env)


def test_search_items(run: Callable[..., Result]) -> None:
    result = run("search", "james brown", "--limit", "3")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert {lines[0].split()[1], lines[1].split()[1]} == {"Q5950", "Q6130343"} and len(lines) == 3


def test_search_properties_json(run: Callable[..., Result]) -> None:
    result = run("search", "--property", "born in", "--json")
    assert result.exit_code == 0, result.output
    first = json.loads(result.output)[0]
    assert first["id"] == "P19" and "born in" in first["aliases"]


def test_filter_with_sparql(run: Callable[..., Result]) -> None:
    result = run("filter", "--subject", "Q1001195", "--property", "P19", "--sparql")
    assert result.exit_code == 0, result.output
    assert "Q1001195 (Buddy Giovinazzo)  P19 (place of birth)  Q60 (New York City)" in result.output
    assert "SELECT" in result.output and "1 statement(s)" in result.output


def test_properties(run: Callable[..., Result]) -> None:
    result = run("properties", "Q60", "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert {(u["property"]["id"], u["direction"]) for u in found["uses"]} == {
        ("P19", "backward"), ("P20", "backward")} and found["truncated"] is False


def test_info_and_build_agree(run: Callable[..., Result], built_kb: BuiltKB) -> None:
    build = run("build")
    assert build.exit_code == 0 and f"up to date: {built_kb.root}" in build.output
    info = run("info", "--json")
    assert info.exit_code == 0, info.output
    report = json.loads(info.output)
    assert report["local_build"]["hash"] == built_kb.digest
    assert report["endpoints"]["store"] == "kifqa-oxigraph"


@pytest.mark.parametrize(("args", "message"), [
    (["search", ""], "Error: KBError: search text is empty"),
    (["filter", "--kb", "bogus", "--subject", "Q1"], "Error: ConfigError: unknown KB spec 'bogus'"),
    (["filter"], "Error: KBError: give at least one of subject, property and value"),
])
def test_errors_are_one_liners(run: Callable[..., Result], args: list[str], message: str) -> None:
    result = run(*args)
    code = 2 if "ConfigError" in message else 1  # a wrong setting or spec is the command's fault: exit 2
    assert result.exit_code == code and message in result.output and "Traceback" not in result.output


def test_missing_data_names_the_variable(tmp_path: object) -> None:
    result = CliRunner().invoke(kb, ["build"], env={"KIFQA_DATA_DIR": "/nonexistent", "KIFQA_CACHE_DIR": str(tmp_path)})
    assert result.exit_code == 1 and "DataError" in result.output and "KIFQA_DATA_DIR" in result.output
