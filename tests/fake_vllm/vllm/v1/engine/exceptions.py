"""``vllm.v1.engine.exceptions`` stand-in: the errors ``AsyncLLM.generate`` raises."""

from __future__ import annotations

from typing import Any


class EngineGenerateError(Exception):
    """Raised when a AsyncLLM.generate() fails. Recoverable."""


class EngineDeadError(Exception):
    """Raised when the EngineCore dies. Unrecoverable."""

    def __init__(self, *args: Any, suppress_context: bool = False, **kwargs: Any) -> None:
        super().__init__("EngineCore encountered an issue. See stack trace (above) for the root cause.", *args,
                         **kwargs)
        self.__suppress_context__ = suppress_context
