"""``kifqa bench batch --endpoint public-like`` runs the job on the default job settings: the job sizes its in-flight
work from the limits (a question's clock stops while its KB calls wait), so the bench sets no hand caps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kifqa.bench import batch
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
