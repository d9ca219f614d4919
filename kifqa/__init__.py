"""kifqa: batch question answering over knowledge graphs with KIF and off-the-shelf LLMs."""

from __future__ import annotations

from kifqa.api import aanswer, answer, open_pipeline
from kifqa.config import Settings
from kifqa.types import Answer, Question, Result, Trace

__all__ = ["Answer", "Question", "Result", "Settings", "Trace", "aanswer", "answer", "open_pipeline"]
