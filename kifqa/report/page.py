"""The report page: one self-contained HTML file that makes no network request.

The vendored Tabulator and Chart.js (``vendor/``, their licences beside them and copied into the
page), the page's own script and the data go in as gzip + base64 blobs that the browser unpacks with
``DecompressionStream``: the table columns at once, the trace records in chunks of :data:`CHUNK`
questions when one of them is opened. The page's script comes before the trace chunks, so the table
is up while the browser still reads them.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from kifqa.redact import redact, redact_data
from kifqa.report.data import CANDIDATES
from kifqa.runs.storage import write_private

#: The vendored libraries (folders under ``vendor/``): script, stylesheet, licence.
TABULATOR = ("tabulator-tables-6.5.3", "tabulator.min.js", "tabulator.min.css", "LICENSE")
CHART = ("chart.js-4.6.1", "chart.umd.min.js", None, "LICENSE.md")

#: Trace records per embedded chunk.
CHUNK = 500

_PACKAGE = resources.files("kifqa.report")
_SOURCE_MAP = re.compile(r"^(//|/\*)# sourceMappingURL=.*$", re.MULTILINE)


def pack(text: str) -> str:
    """``text`` gzip-compressed and base64-encoded (what the page's ``unpack`` reverses)."""
    return base64.b64encode(gzip.compress(text.encode(), compresslevel=6, mtime=0)).decode("ascii")


def _asset(*parts: str) -> str:
    return _PACKAGE.joinpath(*parts).read_text(encoding="utf-8")


def _vendored(library: tuple[str, str, str | None, str], index: int) -> str:
    """A vendored file of ``library`` without its source-map comment (the page asks for no file)."""
    name = library[index]
    if name is None:
        raise ValueError(f"{library[0]} has no file {index}")
    return _SOURCE_MAP.sub("", _asset("vendor", library[0], name))


def _blob(attrs: str, text: str) -> str:
    return f'<script type="application/gzip-base64" {attrs}>{pack(text)}</script>\n'


def _json(value: Any) -> str:
    """``value`` as the JSON of a blob, credentials masked (:func:`~kifqa.redact.redact_data`)."""
    return json.dumps(redact_data(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)


def _licences() -> str:
    parts = []
    for folder, *_, licence in (TABULATOR, CHART):
        parts.append(f"{folder}\n\n{_asset('vendor', folder, licence)}")
    return "\n\n".join(parts).replace("</", "<\\/")


def render_page(*, title: str, about: str, summary: dict[str, Any], columns: dict[str, list[Any]],
                records: list[dict[str, Any]], kind: str = "questions", names: tuple[str, str] | None = None) -> str:
    """The page's HTML: ``summary`` (any JSON dict; known figures are drawn, all are listed), the
    table ``columns`` (one list per column) and one trace record per row (``kind`` ``questions``, or
    ``compare`` with the two runs' ``names``)."""
    n = len(records)
    data = {"kind": kind, "title": title, "about": about, "summary": summary, "columns": columns, "n": n,
            "chunk": CHUNK, "candidates_shown": CANDIDATES, "names": list(names) if names else None}
    blobs = [_blob('id="lib-tabulator"', _vendored(TABULATOR, 1)), _blob('id="lib-chart"', _vendored(CHART, 1)),
             _blob('id="data"', _json(data))]
    traces = "".join(_blob(f'class="traces" data-chunk="{k}"', _json(records[start:start + CHUNK]))
                     for k, start in enumerate(range(0, n, CHUNK)))
    page = _asset("assets", "page.html")
    for marker, text in (("title", html.escape(redact(title))), ("vendor-css", _vendored(TABULATOR, 2)),
                         ("css", _asset("assets", "report.css")), ("licenses", _licences()),
                         ("js", _asset("assets", "report.js")), ("blobs", "".join(blobs)),
                         ("traces", traces)):
        page = page.replace(f"<!--kifqa:{marker}-->", text, 1)
    return page


def write_page(path: str | Path, **page: Any) -> Path:
    """Writes :func:`render_page` ``(**page)`` to ``path`` (whole, private and durable:
    :func:`kifqa.runs.storage.write_private`); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, render_page(**page).encode("utf-8"))
    return path
