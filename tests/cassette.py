"""The record/replay model of the pipeline tests.

Tests replay ``tests/data/cassettes/<name>.sqlite`` and never load a model; a request that is not on
the cassette fails its question with a 'replay cache miss' error. After changing a prompt, record
again with the real default model: ``KIFQA_CASSETTE=record pytest tests/integration/test_pipeline.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

from kifqa.config import Settings
from kifqa.llm.cache import CachedLLM
from kifqa.llm.factory import open_backend

CASSETTES = Path(__file__).resolve().parent / "data" / "cassettes"


def cassette_llm(settings: Settings, name: str) -> CachedLLM:
    """The default local model behind the named cassette (replayed unless ``KIFQA_CASSETTE=record``)."""
    mode = "record" if os.environ.get("KIFQA_CASSETTE") == "record" else "replay"
    return CachedLLM(open_backend(settings), path=CASSETTES / f"{name}.sqlite", mode=mode)
