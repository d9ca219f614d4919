"""``kifqa bench batch --endpoint public-like`` runs the job on the default job settings: the job sizes its in-flight
work from the limits (a question's clock stops while its KB calls wait), so the bench sets no hand caps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kifqa.bench import batch
from kifqa.bench.public_like import render_public_like
from kifqa.config import BatchSettings, Settings


def test_public_like_runs_the_job_on_the_default_settings(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Settings] = []

    def measure(settings: Settings, corpus: Path, root: Path) -> dict[str, Any]:
        seen.append(settings)
        return {}
    monkeypatch.setattr(batch, "measure_public_paths", measure)
    monkeypatch.setattr(batch, "render_public_like", lambda figures: "")
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    result = CliRunner().invoke(batch.batch, ["--endpoint", "public-like", "--questions", "3"])
    assert result.exit_code == 0, result.output
    [settings] = seen
    defaults = BatchSettings()
    assert (settings.batch.max_tasks, settings.batch.task_concurrency, settings.batch.kb_actor_concurrency,
            settings.batch.kb_actors) == (defaults.max_tasks, defaults.task_concurrency,
                                          defaults.kb_actor_concurrency, defaults.kb_actors)


def test_the_table_shows_the_api_requests_by_action() -> None:
    service = {"requests_per_question": 1.5, "charged_s_per_question": 0.2, "throttled_429": 0,
               "inside_retry_after": 0, "max_in_flight": 1, "limit_in_flight": 1}
    api = {**service, "per_question_by_action": {"wbgetentities": 0.5, "wbsearchentities": 1.0}, "inside_waits": 0,
           "without_maxlag": 0, "maxlag_refused": 2}
    run = {"questions": 10, "sustained_questions_per_s": 3.0, "questions_per_s": 3.0, "hours_per_100k": 9.26,
           "wdqs": service, "api": api, "lost": 0, "error_rows": 0, "answered": 10, "cpus": 2, "load_average": [1.0]}
    [line] = [x for x in render_public_like({"hard, api": run}).splitlines() if "wbgetentities" in x]
    assert line.endswith("1.0 / 0.5 / 0")  # search, entities, full text
