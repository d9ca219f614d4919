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
