"""Where settings come from: defaults < YAML file < ``KIFQA_*`` environment < explicit overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

import kifqa
from kifqa.config import Settings


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
    with pytest.raises(ValueError, match="must hold a mapping"):
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
    with pytest.raises(ValidationError):  # the old loose keys are refused, not ignored
        settings.override(kb={"retries": 5})


def test_an_override_is_merged_and_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(kb={"spec": "wikidata", "timeout_s": 7})
    monkeypatch.setenv("KIFQA_KB__TIMEOUT_S", "5")  # an override does not read the environment again
    changed = settings.override(kb={"max_results": "20"}, pipeline={"max_entities": 3})
    assert (changed.kb.spec, changed.kb.timeout_s, changed.kb.max_results) == ("wikidata", 7.0, 20)
    assert changed.pipeline.max_entities == 3 and settings.pipeline.max_entities != 3
    with pytest.raises(ValidationError):
        settings.override(pipeline={"max_entities": "many"})
    with pytest.raises(ValidationError):
        settings.override(nonsense={"x": 1})


def test_runtime_only_settings_are_marked_and_left_out_of_the_shaping_ones() -> None:
    shaping = Settings().shaping()
    assert "resilience" not in shaping["kb"] and "resilience" not in shaping["llm"]
    assert "cache_dir" not in shaping and "limits" not in shaping["batch"]
    assert shaping["kb"]["spec"] == "local" and shaping["pipeline"] == Settings().pipeline.model_dump(mode="json")


def test_the_api_validates_its_overrides() -> None:
    with pytest.raises(ValidationError, match="max_entities"):  # before any model or knowledge base is opened
        kifqa.answer("where was james brown born", settings=Settings(), pipeline={"max_entities": "many"})
