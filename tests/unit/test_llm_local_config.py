"""The ``local`` backend's configuration, checked without loading a model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kifqa.config import LLMSettings, Settings
from kifqa.errors import ConfigError, LLMError
from kifqa.llm import ChatRequest, LocalLLM, Message, open_llm


def test_identity_names_the_weights_without_loading_them(tmp_path: Path) -> None:
    known = LocalLLM(model="qwen2.5-coder-1.5b", cache_dir=tmp_path)
    assert known.identity == "llama.cpp:qwen2.5-coder-1.5b@cc324af070c2"
    assert LocalLLM(model="/somewhere/else/my-model.gguf", cache_dir=tmp_path).identity == "llama.cpp:my-model.gguf"
    assert not (tmp_path / "models").exists()  # nothing assembled yet


def test_open_llm_passes_the_settings_through(tmp_path: Path) -> None:
    settings = Settings(cache_dir=tmp_path, llm=LLMSettings(model="qwen2.5-coder-0.5b", context=2048, parallel=3,
                                                            threads=2, timeout_s=9.0, extra={"n_batch": 256}))
    llm = open_llm(settings)
    assert isinstance(llm, LocalLLM)
    assert (llm.model, llm.cache_dir, llm.context, llm.parallel, llm.threads, llm.timeout_s, llm.options) == (
        "qwen2.5-coder-0.5b", tmp_path, 2048, 3, 2, 9.0, {"n_batch": 256})


def test_bad_sizes_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        LocalLLM(cache_dir=tmp_path, parallel=0)


def test_an_unknown_llama_option_is_a_config_error(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    llm = LocalLLM(model=str(gguf), cache_dir=tmp_path, options={"n_paralel": 2})
    with pytest.raises(ConfigError, match="no option 'n_paralel'"):
        llm.load()


def test_without_xllamacpp_the_error_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    llm = LocalLLM(model=str(tmp_path / "x.gguf"), cache_dir=tmp_path)
    with pytest.raises(LLMError, match=r"pip install 'kifqa\[local\]'"):
        llm.generate([ChatRequest(messages=(Message("user", "hi"),))])


def test_a_model_file_llama_cpp_cannot_read_is_an_llm_error(tmp_path: Path) -> None:
    pytest.importorskip("xllamacpp")
    gguf = tmp_path / "broken.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(LLMError, match="could not load"):
        LocalLLM(model=str(gguf), cache_dir=tmp_path).load()
