"""SimpleDBpediaQA (``simpledbpediaqa/{split}.json``): questions with a subject IRI and alternative predicates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kifqa.errors import DataError


def read_sdbqa(path: Path) -> list[dict[str, Any]]:
    """The ``Questions`` of a SimpleDBpediaQA file as they are: ``{"ID", "Query", "Subject",
    "PredicateList": [{"Predicate", "Direction", "Constraint"}]}``; checked only to be such a list."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read {path} ({err}); set KIFQA_DATA_DIR") from err
    rows = data.get("Questions") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise DataError(f"{path}: expected an object with a 'Questions' list")
    return rows
