"""The errors kifqa raises on purpose; each carries a message a user can act on."""

from __future__ import annotations


class KifqaError(Exception):
    """Base class of kifqa's own errors."""


class ConfigError(KifqaError):
    """A setting, spec or input file is wrong."""


class DataError(KifqaError):
    """The shared data folder is missing or malformed."""


class KBError(KifqaError):
    """A knowledge-base call failed (after retries) or returned something unusable."""


class LLMError(KifqaError):
    """A model call failed (after retries) or its output could not be used."""


class JobStopped(KifqaError):
    """A batch job was stopped by Ctrl-C (``SIGINT``) or ``SIGTERM``: its finished shards stay, and a
    rerun of the same command resumes it."""

    def __init__(self, message: str, *, signum: int) -> None:
        super().__init__(message)
        #: The signal that stopped it.
        self.signum = signum
