"""Where settings come from: defaults < YAML file < ``KIFQA_*`` environment < explicit overrides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import kifqa
from kifqa.config import EndpointLimit, Section, Settings
from kifqa.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("kb:\n  spec: local-server\n  timeout_s: 10\nllm:\n  model: qwen2.5-coder-0.5b\n")
    return path


def test_the_file_beats_the_defaults(config: Path) -> None:
    settings = Settings.load(config)
    assert (settings.kb.spec, settings.kb.timeout_s, settings.llm.model) == ("local-server", 10.0, "qwen2.5-coder-0.5b")
    assert settings.kb.resilience == Settings().kb.resilience


def test_the_environment_beats_the_file_key_by_key(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIFQA_KB__TIMEOUT_S", "5")
    monkeypatch.setenv("KIFQA_CACHE_DIR", "/tmp/kifqa-cache")
    settings = Settings.load(config)
    assert settings.kb.timeout_s == 5.0
    assert settings.kb.spec == "local-server"  # the file's other keys of the same section stay
    assert settings.cache_dir == Path("/tmp/kifqa-cache")


def test_overrides_beat_the_environment_and_are_validated(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIFQA_KB__TIMEOUT_S", "5")
    settings = Settings.load(config, kb={"timeout_s": 2}, cache_dir="/tmp/elsewhere")
    assert settings.kb.timeout_s == 2.0
    assert settings.kb.spec == "local-server"
    assert settings.cache_dir == Path("/tmp/elsewhere")


def test_a_file_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- a\n- list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        Settings.load(path)


def test_an_empty_cache_variable_disables_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIFQA_LLM__CACHE", "")
    assert Settings.load().llm.cache is None


def test_each_endpoint_has_one_resilience_section_that_keeps_its_own_defaults(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIFQA_KB__RESILIENCE__RETRIES", "7")
    monkeypatch.setenv("KIFQA_LLM__RESILIENCE__BREAKER_FAILURES", "2")
    settings = Settings.load()
    kb, llm = settings.kb.resilience, settings.llm.resilience
    assert (kb.retries, kb.max_backoff_s) == (7, 10.0)
    assert (llm.breaker_failures, llm.retries, llm.max_backoff_s) == (2, 4, 30.0)  # the model server's defaults stay
    batch = settings.with_batch_outages()
    assert batch.kb.resilience.max_outage_s == batch.llm.resilience.max_outage_s == settings.batch.max_outage_s > 0
    assert batch.kb.resilience.retries == 7 and batch.llm.resilience.max_backoff_s == 30.0
    with pytest.raises(ConfigError, match="kb.retries: unknown setting"):  # the old loose keys are refused
        settings.override(kb={"retries": 5})


def test_an_override_is_merged_and_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(kb={"spec": "wikidata", "timeout_s": 7})
    monkeypatch.setenv("KIFQA_KB__TIMEOUT_S", "5")  # an override does not read the environment again
    changed = settings.override(kb={"max_results": "20"}, pipeline={"max_entities": 3})
    assert (changed.kb.spec, changed.kb.timeout_s, changed.kb.max_results) == ("wikidata", 7.0, 20)
    assert changed.pipeline.max_entities == 3 and settings.pipeline.max_entities != 3
    with pytest.raises(ConfigError, match="^pipeline.max_entities: Input should be a valid integer"):
        settings.override(pipeline={"max_entities": "many"})
    with pytest.raises(ConfigError, match="^nonsense: unknown setting; valid: data_dir, cache_dir, kb"):
        settings.override(nonsense={"x": 1})


def test_runtime_only_settings_are_marked_and_left_out_of_the_shaping_ones() -> None:
    shaping = Settings().shaping()
    assert "resilience" not in shaping["kb"] and "resilience" not in shaping["llm"]
    assert "cache_dir" not in shaping and "limits" not in shaping["batch"]
    assert shaping["kb"]["spec"] == "local" and shaping["pipeline"] == Settings().pipeline.model_dump(mode="json")


def test_the_api_validates_its_overrides() -> None:
    with pytest.raises(ConfigError, match="max_entities"):  # before any model or knowledge base is opened
        kifqa.answer("where was james brown born", settings=Settings(), pipeline={"max_entities": "many"})


def _sections(kind: type[BaseModel] = Settings,
              path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], type[BaseModel]]]:
    """Every settings section below ``kind`` by its path (``batch.limits`` through one host)."""
    found = []
    for name, info in kind.model_fields.items():
        annotation = info.annotation
        if name == "limits":
            found.append(((*path, name, "example.org"), EndpointLimit))
        elif isinstance(annotation, type) and issubclass(annotation, Section):
            found += [((*path, name), annotation), *_sections(annotation, (*path, name))]
    return found


def _nest(path: tuple[str, ...], leaf: dict[str, Any]) -> dict[str, Any]:
    for part in reversed(path):
        leaf = {part: leaf}
    return leaf


def test_every_section_is_checked() -> None:
    assert {".".join(path) for path, _ in _sections()} == {
        "kb", "kb.resilience", "llm", "llm.resilience", "examples", "pipeline", "batch", "batch.limits.example.org"}


@pytest.mark.parametrize(("path", "section"), _sections(), ids=[".".join(path) for path, _ in _sections()])
def test_a_typo_in_any_section_is_refused_with_the_closest_setting(path: tuple[str, ...],
                                                                  section: type[BaseModel]) -> None:
    for field in section.model_fields:
        typo = field + field[-1]
        with pytest.raises(ConfigError) as refused:
            Settings.load(**_nest(path, {typo: 1}))
        assert str(refused.value) == f"{'.'.join((*path, typo))}: unknown setting; did you mean {field}?"


def test_a_typo_at_the_top_level_lists_the_sections() -> None:
    with pytest.raises(ConfigError, match="^bach: unknown setting; did you mean batch[?]$"):
        Settings.load(bach={})


def test_a_typo_says_which_file_or_variable_it_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("batch:\n  shard_sise: 5\npipeline:\n  max_entites: 3\n")
    monkeypatch.setenv("KIFQA_EXAMPLES__MODDE", "fixed")
    with pytest.raises(ConfigError) as refused:
        Settings.load(path)
    assert str(refused.value) == (
        "examples.modde (KIFQA_EXAMPLES__MODDE): unknown setting; did you mean mode? "
        f"{path}: pipeline.max_entites: unknown setting; did you mean max_entities? "
        f"{path}: batch.shard_sise: unknown setting; did you mean shard_size?")


def test_an_unreadable_settings_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("batch: {shard_size: 5\n")
    with pytest.raises(ConfigError, match=f"^{path}: while parsing"):
        Settings.load(path)


@pytest.mark.timeout(120)
def test_the_cli_refuses_a_typo_in_one_line_with_exit_status_2(tmp_path: Path) -> None:
    config, corpus = tmp_path / "job.yaml", tmp_path / "q.jsonl"
    config.write_text("batch: {llm_actor: 2}\n")
    corpus.write_text('{"question": "where was james brown born"}\n')
    done = subprocess.run([sys.executable, "-c", "from kifqa.cli import main; main()", "run", str(corpus),
                           "--out", str(tmp_path / "out"), "--config", str(config)],
                          cwd=REPO, capture_output=True, text=True, timeout=100)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"Error: ConfigError: {config}: batch.llm_actor: unknown setting; did you mean llm_actors?"]
    assert not (tmp_path / "out").exists()  # refused before the job started


def test_kb_endpoints_name_the_scholarly_host_with_wdqs_limits() -> None:
    """The scholarly-article graph has its own WDQS host since 2025: ``kb.endpoints`` may mirror it, and its
    requests have a default limit of their own, WDQS's."""
    settings = Settings().override(kb={"endpoints": {
        "query-scholarly.wikidata.org": {"url": "http://mirror:7002/sparql", "dialect": "standard"}}})
    mirror = settings.kb.endpoints["query-scholarly.wikidata.org"]
    assert (mirror.url, mirror.dialect) == ("http://mirror:7002/sparql", "standard")
    limits = settings.batch.limits
    assert limits["query-scholarly.wikidata.org"] == limits["query.wikidata.org"]


def test_job_paths_default_to_the_batch_settings_and_are_required(tmp_path: Path) -> None:
    batch = Settings(batch={"corpus": "corpus.jsonl", "out": "run"}).batch
    assert batch.job_paths(None, None) == ("corpus.jsonl", "run")
    assert batch.job_paths(tmp_path / "q.csv", "s3://b/run") == (tmp_path / "q.csv", "s3://b/run")
    with pytest.raises(ConfigError, match=r"a corpus and an output folder .*batch\.corpus/batch\.out"):
        Settings().batch.job_paths("corpus.jsonl", None)
