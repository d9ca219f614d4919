"""Credentials kept out of everything kifqa writes or prints: a URL's user information
(``https://user:pass@host`` → ``https://***@host``) and the values of its secret query parameters
(``?key=``, ``?api_key=``, ``?token=``, ``?access_token=``, ``?password=``, ``?secret=``, ``?sig=`` …)
become ``***``, wherever the URL stands in a text (an error message, a log line, a settings value).
The real URL is still what requests are sent to; only its copies for people and files are redacted.
"""

from __future__ import annotations

import re
from typing import Any

#: What stands in for a redacted credential.
MASK = "***"

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s\"'<>]+@")
_SECRET_PARAMETER = re.compile(
    r"(?P<name>[?&;](?:api[_-]?key|key|access[_-]?key|secret[_-]?key|token|access[_-]?token|session[_-]?token|auth|"
    r"password|passwd|secret|client[_-]?secret|"
    r"sig|signature)=)[^&#;\s\"'<>]*", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it masked (see the module doc)."""
    if "@" in text:
        text = _USERINFO.sub(lambda m: m["scheme"] + MASK + "@", text)
    if "=" in text:
        text = _SECRET_PARAMETER.sub(lambda m: m["name"] + MASK, text)
    return text


def redact_data(value: Any) -> Any:
    """A JSON-like ``value`` (dicts, lists, strings, numbers) with every string :func:`redact`-ed."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(v) for v in value]
    return value
