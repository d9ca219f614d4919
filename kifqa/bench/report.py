"""``kifqa bench report``: the report page of a large run, made from the traces of a real one: its size,
how long it takes to write, and how long headless Chromium takes to show it, search it and open a
question.

The questions of SOURCE (a run or evaluation folder) are copied, with new ids and in shuffled order,
up to ``--questions``; every copy keeps its real trace. Needs Playwright (``kifqa[browser]``) and
Debian's ``chromium`` (``make setup``).
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import click


def synthetic(rows: Sequence[Mapping[str, Any]], n: int, *, seed: int = 0) -> Iterator[dict[str, Any]]:
    """``n`` copies of ``rows`` (cycling, shuffled), each with its own id."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    for k in order:
        row = rows[k % len(rows)]
        qid = f"{row['id']}~{k // len(rows)}"
        yield {**row, "id": qid, "trace": {**(row.get("trace") or {}), "question_id": qid}}


def _load(browser: Any, path: Path, word: str) -> dict[str, float]:
    """One load of the page: seconds to the table (from navigation start), to a search, to an opened question."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        start = time.perf_counter()
        page.goto(path.as_uri(), wait_until="commit", timeout=120_000)
        page.wait_for_selector("html[data-state=ready]", timeout=120_000)
        wall = time.perf_counter() - start
        marks = page.evaluate("Object.fromEntries(performance.getEntriesByType('mark')"
                              ".map(m => [m.name, m.startTime / 1000]))")
        before = page.inner_text("#shown")
        start = time.perf_counter()
        page.fill("#search", word)
        page.wait_for_function("t => document.querySelector('#shown').textContent !== t", arg=before)
        search = time.perf_counter() - start
        start = time.perf_counter()
        page.locator(".tabulator-row").last.click()
        page.wait_for_selector("#trace:not([hidden])")
        opened = time.perf_counter() - start
        page.wait_for_load_state("load", timeout=120_000)
        parsed = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventStart / 1000")
        return {"wall": wall, **marks, "parsed": parsed, "search": search, "open": opened}
    finally:
        page.close()


@click.command()
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--questions", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--loads", type=click.IntRange(min=1), default=3, show_default=True, help="Page loads measured.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Keep the page here.")
def report(source: Path, questions: int, loads: int, out: Path | None) -> None:
    """A --questions page made from the real traces of SOURCE (a run or evaluation folder)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise click.ClickException("kifqa bench report needs Playwright: pip install 'kifqa[browser]'") from None

    from kifqa.report.sources import load_folder, write_rows

    chromium = shutil.which("chromium")
    if chromium is None:
        raise click.ClickException("Debian's chromium is not installed (make setup)")
    summary, rows, kind = load_folder(source)
    with tempfile.TemporaryDirectory() as tmp:
        path = out or Path(tmp) / "report.html"
        start = time.perf_counter()
        write_rows(path, rows=list(synthetic(rows, questions)), summary=summary, kind=kind,
                   about=f"{questions} questions copied from {source}")
        written = time.perf_counter() - start
        size = path.stat().st_size
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            runs = [_load(browser, path, "born") for _ in range(loads)]
            browser.close()
        load = os.getloadavg()[0]
    click.echo(f"page of {questions:,} questions (copies of the {len(rows)} real traces of {source}): "
               f"{size / 1e6:.1f} MB, {size / questions:.0f} bytes per question, written in {written:.1f} s")
    click.echo(f"headless Chromium, median of {loads} loads (min-max), seconds from navigation start "
               f"(load average {load:.1f} on {os.cpu_count()} CPUs):")
    for key, name in (("kifqa:libraries", "libraries unpacked"), ("kifqa:data", "table data unpacked"),
                      ("kifqa:summary", "summary drawn"), ("kifqa:table", "table up (the page is ready)"),
                      ("wall", "ready, as the driver saw it"), ("parsed", "the whole file read (load event)"),
                      ("search", "a search typed (one word)"),
                      ("open", "a question opened (its trace chunk unpacked)")):
        values = [r[key] for r in runs if key in r]
        if values:
            click.echo(f"  {name:<45} {statistics.median(values):6.2f}  ({min(values):.2f}-{max(values):.2f})")
