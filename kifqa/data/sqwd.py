"""SimpleQuestions-Wikidata (``simplequestions-wikidata/{split}_answerable.txt``): one question a line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kifqa.data import paths
from kifqa.errors import DataError


@dataclass(frozen=True, kw_only=True)
class SqwdRow:
    """One line: the question names ``topic`` and asks for ``answer``; ``property`` is ``Pn`` (the
    statement is ``(topic, Pn, answer)``) or ``Rn`` (it is ``(answer, Pn, topic)``)."""

    topic: str
    property: str
    answer: str
    #: The question as written, surrounding spaces removed.
    question: str
    #: Line number in the file (1-based).
    line: int


def read_sqwd(data_dir: Path, split: str, *, limit: int | None = None) -> list[SqwdRow]:
    """The first ``limit`` (default: all) questions of a split (``train``, ``valid``)."""
    path = Path(data_dir) / paths.sqwd(split)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise DataError(f"cannot read {path} ({err}); set KIFQA_DATA_DIR") from err
    rows = []
    for n, line in enumerate(lines[:limit] if limit else lines, 1):
        fields = line.split("\t")
        if len(fields) != 4:
            raise DataError(f"{path}:{n}: expected topic<TAB>property<TAB>answer<TAB>question")
        topic, prop, answer, question = fields
        rows.append(SqwdRow(topic=topic, property=prop, answer=answer, question=question.strip(), line=n))
    return rows
