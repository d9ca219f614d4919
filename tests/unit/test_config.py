"""Where settings come from: defaults < YAML file < ``KIFQA_*`` environment < explicit overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from kifqa.config import Settings


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("kb:\n  spec: local-server\n  timeout_s: 10\nllm:\n  model: qwen2.5-coder-0.5b\n")
    return path


def test_the_file_beats_the_defaults(config: Path) -> None:
    settings = Settings.load(config)
    assert (settings.kb.spec, settings.kb.timeout_s, settings.llm.model) == ("local-server", 10.0, "qwen2.5-coder-0.5b")
    assert settings.kb.retries == Settings().kb.retries


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
