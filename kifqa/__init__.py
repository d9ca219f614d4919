"""kifqa: batch question answering over knowledge graphs with KIF and off-the-shelf LLMs.

The public names are imported on first use (PEP 562), so that a command that needs none of them, such
as ``kifqa ask`` answered by a running ``kifqa serve``, starts without importing KIF or the pipeline.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kifqa.api import aanswer, answer, open_pipeline
    from kifqa.config import Settings
    from kifqa.types import Answer, Question, Result, Trace

#: Public name → the module that defines it.
_PUBLIC = {"aanswer": "kifqa.api", "answer": "kifqa.api", "open_pipeline": "kifqa.api",
           "Settings": "kifqa.config", "Answer": "kifqa.types", "Question": "kifqa.types",
           "Result": "kifqa.types", "Trace": "kifqa.types"}

__all__ = ["Answer", "Question", "Result", "Settings", "Trace", "aanswer", "answer", "open_pipeline"]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'kifqa' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value
