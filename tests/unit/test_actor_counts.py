"""``batch.llm_actors`` and ``batch.kb_actors``: ``auto`` uses every core, an explicit number wins."""

from __future__ import annotations

import os

import pytest

from kifqa.config import Settings
from kifqa.llm.factory import in_process_instances


def test_auto_resolves_to_the_machines_cores() -> None:
    settings = Settings()
    assert settings.batch.llm_actors == "auto" and settings.batch.kb_actors == "auto"
    assert settings.batch.llm_actor_count(settings.llm) == os.cpu_count()
    assert in_process_instances(settings) == os.cpu_count()


def test_auto_divides_the_cores_by_the_threads_of_an_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    one, two = Settings(), Settings(llm={"threads": 2})
    assert one.batch.llm_actor_count(one.llm) == 8 and two.batch.llm_actor_count(two.llm) == 4
    assert one.batch.llm_actor_count(one.llm, cpus=16) == 16  # a Ray cluster's cores, when it says
    assert one.batch.kb_actor_count() == 2
    assert in_process_instances(one, share=2) == 4  # two modes of kifqa bench examples at once
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert one.batch.kb_actor_count() == 1 and two.batch.llm_actor_count(two.llm) == 1


def test_an_explicit_number_wins_and_other_backends_get_one() -> None:
    settings = Settings(batch={"llm_actors": 3, "kb_actors": 5})
    assert settings.batch.llm_actor_count(settings.llm, cpus=64) == 3
    assert settings.batch.kb_actor_count(cpus=64) == 5
    served = Settings(llm={"backend": "openai", "base_url": "http://127.0.0.1:1/v1"})
    assert served.batch.llm_actor_count(served.llm, cpus=64) == 1
    assert Settings(batch={"llm_actor_gpus": 1}).batch.llm_actor_count(Settings().llm, cpus=64) == 1
    with pytest.raises(ValueError):
        Settings(batch={"llm_actors": 0})
