"""kifqa: batch question answering over knowledge graphs with KIF and off-the-shelf LLMs.

The public names are imported on first use (:mod:`kifqa.lazy`), so that a command that needs none of
them, such as ``kifqa ask`` answered by a running ``kifqa serve``, starts without importing KIF or the
pipeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kifqa.lazy import exports

if TYPE_CHECKING:
    from kifqa.api import aanswer, answer, open_pipeline
    from kifqa.config import Settings
    from kifqa.types import Answer, Question, Result, Trace

__all__ = ["Answer", "Question", "Result", "Settings", "Trace", "aanswer", "answer", "open_pipeline"]
__getattr__ = exports(__name__, {"aanswer": "kifqa.api", "answer": "kifqa.api", "open_pipeline": "kifqa.api",
                                 "Settings": "kifqa.config", "Answer": "kifqa.types", "Question": "kifqa.types",
                                 "Result": "kifqa.types", "Trace": "kifqa.types"})
