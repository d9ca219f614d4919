"""The HTML report in headless Chromium (Debian's ``chromium``, driven by Playwright) on real runs.

Two real run folders of the same questions: the real pipeline on the built local KB, answered by the
0.5B model replayed from ``tests/data/cassettes/batch.sqlite`` (run A, plus one bad input row), and by
the zero-cost gold backend (run B). The pages of ``kifqa report`` and ``kifqa eval`` are opened,
searched, filtered and a question's trace is checked against the run's Parquet files.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kifqa.api import open_pipeline
from kifqa.cli import cli
from kifqa.config import Settings
from kifqa.eval.datasets import load_sqwd
from kifqa.pipeline.schedule import answer_all
from kifqa.report.data import ANSWERS
from kifqa.runs import ANSWER_SCHEMA, TRACE_SCHEMA, RunFolder
from kifqa.types import Question
from tests.cassette import CASSETTES

N = 16
BAD = Question("bad-input", "?!")


def _answer(settings: Settings, kb, questions: list[Question], out: Path) -> Path:
    """``questions`` answered in-process, written as a batch run folder (two shards)."""

    async def run():
        async with open_pipeline(settings=settings, kb=kb) as pipeline:
            return await answer_all(pipeline, questions, concurrency=4)

    results = asyncio.run(run())
    folder = RunFolder(out)
    folder.create()
    half = len(results) // 2
    for index, part in enumerate((results[:half], results[half:])):
        answers = pa.Table.from_pylist([row for r in part for row in r.answer_rows()], schema=ANSWER_SCHEMA)
        traces = pa.Table.from_pylist([r.trace.to_row() for r in part], schema=TRACE_SCHEMA)
        folder.write_shard(index, answers, traces)
    return out


def _kifqa(*args: str) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def runs(settings: Settings, local_kb, tmp_path_factory) -> dict[str, Path]:
    """Run A (0.5B model from the cassette, one bad row), run B (gold backend), their pages."""
    tmp = tmp_path_factory.mktemp("report")
    questions = [Question(q.id, q.text) for q in load_sqwd(settings.data_dir, "valid", limit=N)]
    replay = settings.model_copy(update={"llm": settings.llm.model_copy(update={
        "model": "qwen2.5-coder-0.5b", "cache": CASSETTES / "batch.sqlite", "cache_mode": "replay"})})
    gold = settings.model_copy(update={"llm": settings.llm.model_copy(update={"backend": "gold", "cache": None})})
    a = _answer(replay, local_kb, [*questions, BAD], tmp / "a")
    b = _answer(gold, local_kb, questions, tmp / "b")
    pages = {"a": a, "b": b, "run": tmp / "a-unscored.html"}
    _kifqa("report", a, "--out", pages["run"])                 # before scoring: a plain run
    for folder in (a, b):
        _kifqa("eval", "--dataset", "sqwd:valid", "--run", folder)   # writes report.html into the folder
    pages["scored"] = tmp / "a.html"
    _kifqa("report", a, "--out", pages["scored"])
    pages["compare"] = tmp / "compare.html"
    _kifqa("report", "--compare", a, b, "--out", pages["compare"])
    return pages


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed: run `make setup`", pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield b
        b.close()


class Page:
    """An opened report page; every request it makes is kept."""

    def __init__(self, browser, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("html[data-state=ready]", timeout=30_000)
        assert self.errors == [] and self.requests == [path.as_uri()], "no request but the file itself"

    def shown(self) -> int:
        text = self.page.inner_text("#shown")
        return int(re.match(r"([\d,]+) of", text).group(1).replace(",", ""))

    def open_first_row(self) -> str:
        row = self.page.locator(".tabulator-row").first
        qid = row.locator('.tabulator-cell[tabulator-field="id"]').inner_text()
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        for _ in range(2):  # a click that lands while the table redraws after a filter is lost: click again
            row.click()
            try:
                self.page.wait_for_selector(f'#trace[data-id="{qid}"]', timeout=10_000)
                return qid
            except PlaywrightTimeout:
                pass
        row.click()
        self.page.wait_for_selector(f'#trace[data-id="{qid}"]')
        return qid


def _parquet(folder: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, str]]]:
    """The traces (by question id) and answers (id → label, by question id) of a run folder."""
    traces = {r["question_id"]: json.loads(r["trace"]) for r in pq.read_table(folder / "traces").to_pylist()}
    answers: dict[str, dict[str, str]] = {}
    for r in pq.read_table(folder / "answers").to_pylist():
        answers.setdefault(r["question_id"], {})[r["answer"]] = r["answer_label"]
    return traces, answers


def _rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines()]


def _check_trace(view, trace: dict[str, Any], answers: dict[str, str]) -> None:
    """What an opened question shows, against its trace and answers from the Parquet files."""
    shown = {li.get_attribute("data-id"): li.inner_text() for li in view.locator("ul.answers li").all()}
    assert set(shown) == set(answers)
    for answer, label in answers.items():
        assert shown[answer].startswith(label or answer)
    rows = view.locator("table.candidates tbody tr").all()
    first = [c["id"] for c in trace["candidates"][:10]]
    assert [r.get_attribute("data-id") for r in rows][:len(first)] == first
    kept = {r.get_attribute("data-id") for r in rows if "kept" in (r.get_attribute("class") or "")}
    assert kept == set(trace["entities"])
    top = rows[0].locator("td").all_inner_texts()
    assert top[1:3] == [trace["candidates"][0]["id"], trace["candidates"][0]["label"]]
    assert float(top[5]) == pytest.approx(trace["candidates"][0]["score"], abs=0.005)
    options = view.locator("table.options tbody tr").all()
    assert len(options) == len(trace["options"])
    chosen = [o.locator("td").all_inner_texts()[1:] for o in options if "kept" in (o.get_attribute("class") or "")]
    assert chosen == [[r["entity"], r["property"], r["direction"]] for r in trace["relations"]]
    def blanks(sparql: str) -> str:  # blank-node labels, random per compilation, are numbered on the page
        return re.sub(r"_:\w+", "_:?", sparql.strip())

    assert [blanks(t) for t in view.locator("pre.sparql").all_inner_texts()] == [blanks(f["sparql"])
                                                                              for f in trace["filters"]]
    calls = view.locator("table.calls tbody tr").all()
    assert [c.locator("td").all_inner_texts()[:4] for c in calls] == [
        [c["step"], f"{c['prompt_tokens']:,}", f"{c['cached_prompt_tokens']:,}", f"{c['completion_tokens']:,}"]
        for c in trace["llm_calls"]]
    assert view.locator("pre.draft-output").inner_text().strip() == trace["draft_output"].strip()


def test_search_filter_and_open_a_question_of_a_scored_run(runs, browser, tmp_path) -> None:
    assert (runs["a"] / "report.html").stat().st_size > 100_000, "kifqa eval writes the page too"
    rows = _rows(runs["a"])
    traces, answers = _parquet(runs["a"])
    page = Page(browser, runs["scored"])
    assert page.shown() == N
    assert page.page.inner_text('.figure[data-key="questions"] .value') == str(N)
    assert page.page.locator(".chart canvas").count() >= 4

    failed = next(r for r in rows if r["failure"])
    word = max(re.findall(r"\w+", failed["question"]), key=len).lower()

    def text(r: dict[str, Any]) -> str:  # what the search sees: id, question, the answers a row shows
        shown = list(r["labels"].items())[:ANSWERS]
        return f"{r['id']} {r['question']} {' '.join(f'{v} {k}' for k, v in shown)}".lower()

    page.page.fill("#search", word)
    assert page.shown() == sum(word in text(r) for r in rows)
    page.page.select_option("#failure-filter", failed["failure"])
    assert page.shown() == sum(word in text(r) and r["failure"] == failed["failure"] for r in rows) >= 1
    qid = page.open_first_row()
    row = next(r for r in rows if r["id"] == qid)
    assert row["failure"] == failed["failure"] and word in text(row)
    view = page.page.locator("#trace")
    assert view.locator(".failure").inner_text().startswith(f"{row['failure']} — {row['failure_detail']}")
    assert view.locator(".score").inner_text() == f"{row['precision']:.2f} / {row['recall']:.2f} / {row['f1']:.2f}"
    _check_trace(view, traces[qid], answers.get(qid, {}))

    page.page.fill("#search", "")
    page.page.select_option("#failure-filter", "")
    page.page.click('.tabulator-col[tabulator-field="seconds"] .tabulator-col-title')  # sort by seconds
    first = page.page.locator('.tabulator-row .tabulator-cell[tabulator-field="id"]').first.inner_text()
    seconds = {r["id"]: r["seconds"] for r in rows}
    assert seconds[first] == min(seconds.values()), "the fastest question first (of equal times, any)"

    shot = tmp_path / "report.png"
    page.page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 50_000


def test_step_error_filter_on_an_unscored_run(runs, browser) -> None:
    traces, _ = _parquet(runs["a"])
    page = Page(browser, runs["run"])
    assert page.shown() == N + 1
    assert page.page.inner_text('.figure[data-key="questions"] .value') == str(N + 1)
    page.page.select_option("#step-filter", "input")
    assert page.shown() == 1
    assert page.open_first_row() == BAD.id
    assert page.page.inner_text("#trace .error") == f"input: {traces[BAD.id]['error']}"


def test_compare_shows_the_changed_questions_side_by_side(runs, browser) -> None:
    a, b = {r["id"]: r for r in _rows(runs["a"])}, {r["id"]: r for r in _rows(runs["b"])}
    changed = {q for q in a if (a[q]["predicted"], a[q]["failure"], a[q]["f1"]) != (b[q]["predicted"], b[q]["failure"], b[q]["f1"])}
    assert changed, "the gold backend fixes some of the 0.5B model's failures"
    page = Page(browser, runs["compare"])
    assert page.shown() == len(changed)
    qid = page.open_first_row()
    assert qid in changed
    for side, folder in (("a", runs["a"]), ("b", runs["b"])):
        traces, answers = _parquet(folder)
        _check_trace(page.page.locator(f"#trace .side-{side}"), traces[qid], answers.get(qid, {}))
