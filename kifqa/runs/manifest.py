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
from kifqa.redact import redact_data
from kifqa.runs.corpus import Corpus
from kifqa.runs.storage import shown


def job_key(shaping: dict[str, Any], corpus: Corpus) -> str:
    """A hash of what a job's output depends on: the corpus and ``shaping``, the settings that shape answers
    (:meth:`Settings.shaping <kifqa.config.Settings.shaping>`: all but the runtime-only ones)."""
    return hashlib.sha256(json.dumps({**shaping, "corpus": corpus.sha256}, sort_keys=True).encode()).hexdigest()[:16]


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
        "config": redact_data(settings.model_dump(mode="json")),
        "runs": [*(previous or {}).get("runs", []), {"started_at": now()}],
    }


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
