"""The job key: what a run folder's output depends on, so that a rerun resumes the same job or refuses
another one; runtime-only settings (marked on the fields) may change between runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kifqa.batch.driver import _prepare
from kifqa.config import Settings
from kifqa.errors import ConfigError
from kifqa.runs import RunFolder, read_corpus
from kifqa.runs.manifest import job_key


@pytest.fixture
def corpus(tmp_path: Path):
    path = tmp_path / "questions.jsonl"
    path.write_text('{"id": "q1", "question": "where was james brown born"}\n')
    return read_corpus(path)


@pytest.mark.parametrize("change", [
    {"kb": {"resilience": {"breaker_failures": 3, "breaker_cooldown_s": 1.0, "backoff_s": 0.1},
            "truncated_retries": 0}},
    {"llm": {"resilience": {"breaker_failures": 2, "max_backoff_s": 1.0, "retries": 0}, "cache_mode": "off"}},
    {"batch": {"max_outage_s": 5.0, "kb_actors": 4, "question_timeout_s": 10.0}},
    {"cache_dir": "/tmp/elsewhere"},
    {"llm": {"extra": {"gpu_memory_utilization": 0.8, "max_num_seqs": 64, "tensor_parallel_size": 2}}},
    {"llm": {"extra": {"n_gpu_layers": 99, "n_batch": 512}}},
    {"data_dir": "/mnt/copy-of-the-data"},
    {"llm": {"base_url": "http://gpu-node-2:8000/v1"}},
], ids=["kb-breaker", "llm-breaker", "batch-actors", "cache-dir", "vllm-memory", "llamacpp-offload", "data-dir",
        "base-url"])
def test_a_changed_runtime_setting_resumes_the_same_job(change: dict, corpus, tmp_path: Path) -> None:
    settings = Settings()
    folder = RunFolder(tmp_path / "run")
    folder.create()
    folder.write_manifest({"job_key": job_key(settings.shaping(), corpus), "runs": []})
    changed = settings.override(**change)
    assert job_key(changed.shaping(), corpus) == job_key(settings.shaping(), corpus)
    assert _prepare(folder, job_key(changed.shaping(), corpus), resume=True)[0] == folder.read_manifest()


@pytest.mark.parametrize("change", [{"kb": {"spec": "local-server"}}, {"llm": {"model": "qwen2.5-coder-0.5b"}},
                                    {"llm": {"backend": "openai"}}, {"llm": {"extra": {"temperature": 0.7}}},
                                    {"llm": {"extra": {"dtype": "float16"}}}, {"llm": {"context": 2048}},
                                    {"pipeline": {"max_entities": 3}}, {"examples": {"mode": "retrieved"}}])
def test_a_changed_shaping_setting_is_another_job(change: dict, corpus, tmp_path: Path) -> None:
    settings = Settings()
    folder = RunFolder(tmp_path / "run")
    folder.create()
    folder.write_manifest({"job_key": job_key(settings.shaping(), corpus), "runs": []})
    with pytest.raises(ConfigError, match="holds the output of another job"):
        _prepare(folder, job_key(settings.override(**change).shaping(), corpus), resume=True)
