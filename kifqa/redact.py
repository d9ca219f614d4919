"""Credentials kept out of everything kifqa writes or prints. In any text (an error message, a log line, a
command line, a settings value) these become ``***``:

- a URL's user information, up to the last ``@`` before the host (``https://user:p@ss@host`` →
  ``https://***@host``);
- the value given to a name that looks secret: a query parameter, an assignment or a mapping entry whose name
  ends in a word such as key, token, secret, password, pwd, signature, credential or auth (``?private_token=``,
  ``X-Amz-Signature=``, ``api_key: …``, ``"hub_token": "…"``), but not ``max_tokens`` or ``api_key_env``;
- tokens of known shapes wherever they stand: OpenAI ``sk-…``, Hugging Face ``hf_…``, AWS access key ids
  ``AKIA…``/``ASIA…``, GitHub ``ghp_…``/``github_pat_…``, Slack ``xox…-``, and ``Bearer …``.

The real values are still what requests are sent with; only their copies for people and files are masked.
:func:`mask_stdio` applies :func:`redact` to every line a process prints.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

#: What stands in for a redacted credential.
MASK = "***"

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s\"'<>]*@")
#: The last word of a secret's name (matched without regard to case).
_SECRET_WORD = (r"(?:api|access|auth|private|secret|session|client|refresh|security|id)?"
                r"(?:key|token|secret|password|passwd|pwd|passphrase|sig|signature|credentials?|auth|authorization|"
                r"cookie|jwt)")
#: A name whose last word (after ``_``, ``-``, ``.`` or a lower-to-upper case change) is a secret word.
_SECRET_NAME = rf"(?<![A-Za-z0-9_.-])(?:[A-Za-z0-9_.-]*(?:[_.-]|(?<=[a-z0-9])(?=[A-Z])))?(?i:{_SECRET_WORD})"
_ASSIGNMENT = re.compile(
    rf"(?P<name>{_SECRET_NAME}[\"']?\s*[:=]\s*(?:(?i:bearer|basic|token)\s+)?)"
    r"(?:\"(?P<double>[^\"\n]*)\"|'(?P<single>[^'\n]*)'|(?P<bare>[^\s&#;,\"'<>(){}\[\]]+))")
_TOKEN = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])|"
    r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abprs]-[A-Za-z0-9-]{10,})")
_BEARER = re.compile(r"(?P<scheme>\b[Bb]earer\s+)[A-Za-z0-9._~+/-]{8,}=*")


def secret_name(name: str) -> bool:
    """Whether a setting, parameter or header called ``name`` holds a secret (see the module doc)."""
    return re.fullmatch(_SECRET_NAME, name) is not None


def redact(text: str) -> str:
    """``text`` with every credential in it masked (see the module doc)."""
    if "@" in text:
        text = _USERINFO.sub(lambda m: m["scheme"] + MASK + "@", text)
    text = _BEARER.sub(lambda m: m["scheme"] + MASK, _TOKEN.sub(MASK, text))
    if "=" in text or ":" in text:
        text = _ASSIGNMENT.sub(_mask_assignment, text)
    return text


def _mask_assignment(match: re.Match[str]) -> str:
    if match["double"] is not None:
        return f'{match["name"]}"{MASK}"'
    if match["single"] is not None:
        return f"{match['name']}'{MASK}'"
    return match["name"] + MASK


def redact_data(value: Any) -> Any:
    """A JSON-like ``value`` (dicts, lists, strings, numbers) with every string :func:`redact`-ed and the
    value of every key that :func:`secret_name` flags masked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: MASK if secret_name(str(k)) and isinstance(v, (str, int, float)) and v != "" else redact_data(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(v) for v in value]
    return value


class RedactedStream:
    """A text stream that passes what is written to ``stream`` :func:`redact`-ed, a line at a time (a
    secret written in pieces is masked whole); :meth:`flush` passes on a partial line too (a progress bar's)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        done, newline, self._pending = self._pending.rpartition("\n")
        if newline:
            self.stream.write(redact(done + newline))
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            self.stream.write(redact(self._pending))
            self._pending = ""
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def mask_stdio() -> None:
    """Routes this process's ``sys.stdout`` and ``sys.stderr`` through :class:`RedactedStream`: every line it
    prints after this (``click.echo``, ``print``, log records, progress bars) is redacted. Idempotent."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactedStream):
            setattr(sys, name, RedactedStream(stream))
