"""Package attributes imported on first use (PEP 562): importing a package then costs only what its
caller uses (a Ray worker of one actor kind, ``kifqa ask`` through ``kifqa serve``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def exports(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports each public name from the module ``where``
    maps it to, on first use, and keeps it."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
