"""What the LLM pool reads from the settings before it starts anything: GPU workers per engine, the GPUs a
job needs, and which secrets the driver forwards to the actors."""

from __future__ import annotations

import pytest

from kifqa.batch.llmpool import engine_workers, forwarded_secrets
from kifqa.batch.preflight import gpus_needed
from kifqa.config import Settings
from kifqa.errors import ConfigError


def vllm(extra: dict[str, object], **batch: object) -> Settings:
    return Settings(llm={"backend": "vllm", "model": "m", "extra": extra}, batch=batch)


def test_gpu_workers_are_tensor_times_pipeline_parallel_for_vllm_only() -> None:
    assert engine_workers(vllm({}).llm) == 1
    assert engine_workers(vllm({"tensor_parallel_size": 4, "pipeline_parallel_size": 2}).llm) == 8
    assert engine_workers(Settings(llm={"backend": "openai", "extra": {"tensor_parallel_size": 4}}).llm) == 1


@pytest.mark.parametrize("bad", [0, "2", 1.5])
def test_a_parallel_size_that_is_no_whole_number_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError, match="tensor_parallel_size and pipeline_parallel_size must be whole numbers"):
        engine_workers(vllm({"tensor_parallel_size": bad}).llm)


def test_gpus_needed_counts_actors_gpus_and_parallel_workers() -> None:
    assert gpus_needed(vllm({}, llm_actors=4, llm_actor_gpus=1)) == 4
    assert gpus_needed(vllm({"tensor_parallel_size": 2}, llm_actors=3, llm_actor_gpus=1)) == 6
    assert gpus_needed(vllm({"tensor_parallel_size": 2}, llm_actors=1)) == 2  # a worker holds at least one GPU
    assert gpus_needed(Settings(batch={"llm_actors": 2})) == 0


def test_the_driver_forwards_only_the_secrets_the_backend_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    monkeypatch.setenv("MY_KEY", "sk-x")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert list(forwarded_secrets(vllm({}))) == ["HF_TOKEN"]
    openai = Settings(llm={"backend": "openai", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "MY_KEY"})
    secrets = forwarded_secrets(openai)
    assert list(secrets) == ["MY_KEY"] and secrets["MY_KEY"].get_secret_value() == "sk-x"
    assert "sk-x" not in repr(secrets) and "sk-x" not in str(secrets)
    assert forwarded_secrets(Settings(llm={"backend": "local"})) == {}


@pytest.mark.parametrize("gpus", [2, 0.5])
def test_tensor_parallel_with_other_than_one_gpu_per_worker_is_refused_at_load(gpus: float) -> None:
    """vLLM's Ray executor runs one worker per GPU, each in a bundle of one GPU: say what to set instead."""
    with pytest.raises(ConfigError, match=r"batch\.llm_actor_gpus: 1"):
        Settings.load(llm={"backend": "vllm", "model": "m", "extra": {"tensor_parallel_size": 2}},
                      batch={"llm_actor_gpus": gpus})
    for fine in (0, 1):
        Settings.load(llm={"backend": "vllm", "model": "m", "extra": {"tensor_parallel_size": 2}},
                      batch={"llm_actor_gpus": fine})
    Settings.load(llm={"backend": "vllm", "model": "m"}, batch={"llm_actor_gpus": 2})  # one worker: any share
