"""The manifest of a job (``manifest.json``) and the key that tells whether a rerun resumes the same job."""

from __future__ import annotations

import hashlib
import json
import subprocess
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from kifqa.config import Settings
from kifqa.runs.corpus import Corpus
from kifqa.runs.storage import shown


def job_key(settings: Settings, corpus: Corpus) -> str:
    """A hash of what a job's output depends on: the corpus and the settings that shape answers (all but
    the runtime-only ones, :data:`kifqa.config.RUNTIME`)."""
    shaping = settings.shaping()
    shaping["corpus"] = corpus.sha256
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]


def new_manifest(settings: Settings, corpus: Corpus, key: str, n_shards: int,
                 previous: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest of a run starting now (continuing ``previous``, the resumed job's manifest)."""
    return {
        "status": "running",
        "job_key": key,
        "config_digest": settings.digest(),
        "code_version": code_version(),
        "corpus": {"path": shown(corpus.path), "sha256": corpus.sha256, "questions": len(corpus),
                   "input_errors": corpus.n_errors},
        "shard_size": settings.batch.shard_size,
        "shards": n_shards,
        "started_at": previous["started_at"] if previous else now(),
        "finished_at": None,
        "config": _without_credentials(settings.model_dump(mode="json")),
        "runs": [*(previous or {}).get("runs", []), {"started_at": now()}],
    }


def _without_credentials(config: dict[str, Any]) -> dict[str, Any]:
    """The settings with the corpus and output locations as :func:`~kifqa.runs.storage.shown` names them (a URI
    may carry a key)."""
    batch = config.get("batch") or {}
    for name in ("corpus", "out"):
        if batch.get(name):
            batch[name] = shown(batch[name])
    return config


def code_version() -> str:
    """kifqa's version, with the git commit (``-dirty`` when changed) when running from a checkout."""
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=Path(__file__).parent,
            capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        described = ""
    return f"{version('kifqa')}+g{described}" if described else version("kifqa")


def now() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")
