"""``kifqa silver`` on real questions: the real pipeline on the built local KB with a scripted model,
in-process and from a batch-shaped run folder; the files read back with pyarrow and pandas."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import kifqa.api
from kifqa.cli import cli
from kifqa.eval.confidence_fit import default_rater
from kifqa.eval.datasets import load_sqwd
from kifqa.eval.silver import SILVER_SCHEMA, build_silver
from kifqa.pipeline import Pipeline
from kifqa.pipeline.schedule import answer_all
from kifqa.runs import Prediction
from kifqa.types import Question, Result
from tests.conftest import TEST_CACHE
from tests.integration.test_eval_report import scripted, write_run

#: sasha (exact, one option), carolsfeld (near match, model pick), french city (wrong unknown, many
#: answers), spyglass (malformed draft), weird war.
PICKED = (0, 1, 3, 11, 13)


@pytest.fixture(scope="module")
def results(data_dir: Path, local_kb) -> list[Result]:
    qs = load_sqwd(data_dir, "valid", limit=14)
    pipeline = Pipeline(kb=local_kb, llm=scripted(data_dir))
    return asyncio.run(answer_all(pipeline, [Question(qs[i].id, qs[i].text) for i in PICKED], concurrency=3))


def test_silver_rows(results: list[Result], local_kb) -> None:
    rows, summary = asyncio.run(build_silver([Prediction.from_result(r) for r in results], local_kb))
    by_id = {r["id"]: r for r in rows}
    assert summary.questions == 5 and summary.errors == 1 and set(by_id) == {
        "sqwd-valid-0", "sqwd-valid-1", "sqwd-valid-3", "sqwd-valid-13"}
    sasha = by_id["sqwd-valid-0"]
    assert sasha["logical_form"] == "(Q318926 | P19 | ?x)"
    assert sasha["relations"][0] | {"entity_label": ""} == {"entity": "Q318926", "entity_label": "",
                                                           "property": "P19", "property_label": "place of birth",
                                                           "direction": "forward"}
    assert sasha["answers"] == ["Q1010"] and sasha["answer_labels"] == ["Maribor"]
    assert sasha["kif_filter"][0].startswith("Filter(") and "SELECT" in sasha["kif_sparql"][0]
    assert sasha["query"] == ("PREFIX wd: <http://www.wikidata.org/entity/>\n"
                              "PREFIX wdt: <http://www.wikidata.org/prop/direct/>\n"
                              "SELECT DISTINCT ?x WHERE { wd:Q318926 wdt:P19 ?x . }")
    assert summary.not_reproduced == 0  # every kept row's query, executed again, gave its answers
    assert sasha["confidence"] == 1.0 and sasha["draft"] == ["(sasha vujačić | place of birth | ?x)"]
    carolsfeld = by_id["sqwd-valid-1"]
    assert carolsfeld["logical_form"] == "(?x | P57 | Q2568216)" and carolsfeld["answer_labels"] == ["Stay"]
    assert carolsfeld["confidence_entity"] < 0.6  # a near match ('wiebke carolsfeld'), close search scores
    assert carolsfeld["confidence"] == pytest.approx(
        carolsfeld["confidence_entity"] * carolsfeld["confidence_relation"] * carolsfeld["confidence_answers"], abs=1e-3)
    assert carolsfeld["confidence"] < 0.6 < sasha["confidence"]
    wrong = by_id["sqwd-valid-3"]  # the 'french city' draft: many answers, low confidence
    assert wrong["n_answers"] > 1 and wrong["confidence"] < carolsfeld["confidence"] + 0.3


def test_silver_command_from_a_run(results: list[Result], tmp_path: Path, data_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(TEST_CACHE))  # the built base the rows' queries are executed on
    run = write_run(tmp_path / "run", results)
    out = tmp_path / "silver"
    result = CliRunner().invoke(cli, ["silver", "--run", str(run), "--out", str(out), "--min-confidence", "0.5"])
    assert result.exit_code == 0, result.output
    assert "5: 2 silver rows" in result.output  # sasha and weird war clear 0.5
    table = pq.read_table(out / "silver.parquet")
    assert table.schema.equals(SILVER_SCHEMA) and table.column("id").to_pylist() == ["sqwd-valid-0", "sqwd-valid-13"]
    assert min(table.column("confidence").to_pylist()) >= 0.5
    assert [json.loads(x)["id"] for x in (out / "silver.jsonl").read_text().splitlines()] == table.column("id").to_pylist()
    page = re.search(r'id="data">([^<]+)<', (out / "report.html").read_text()).group(1)
    columns = json.loads(gzip.decompress(base64.b64decode(page)))["columns"]
    assert columns["id"] == [r.question.id for r in results], "the page shows every question, kept or not"
    confidence = dict(zip(columns["id"], columns["confidence"]))
    assert [confidence[i] for i in table.column("id").to_pylist()] == table.column("confidence").to_pylist()
    pd = pytest.importorskip("pandas")
    assert pd.read_parquet(out / "silver.parquet")["answer_labels"].iloc[0].tolist() == ["Maribor"]


def test_silver_keeps_answers_above_the_calibrated_threshold(results: list[Result], tmp_path: Path, data_dir: Path,
                                                             monkeypatch) -> None:
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(TEST_CACHE))  # the built base the rows' queries are executed on
    run = write_run(tmp_path / "run", results)
    predictions = [Prediction.from_result(r) for r in results]
    rows, _ = asyncio.run(build_silver(predictions, None, rater=default_rater()))  # the CLI's rater
    confidences = {r["id"]: r["confidence"] for r in rows}
    top = max(confidences.values())
    calibration = tmp_path / "gold-eval"
    calibration.mkdir()
    curve = [{"threshold": top, "n": 50, "coverage": 0.25, "precision": 0.995},
             {"threshold": 0.05, "n": 150, "coverage": 0.75, "precision": 0.96},
             {"threshold": 0.01, "n": 190, "coverage": 0.95, "precision": 0.9}]
    (calibration / "metrics.json").write_text(json.dumps({"calibration": {"questions": 200, "curve": curve}}))
    for target, kept in ((0.99, {i for i, c in confidences.items() if c >= top}),
                         (0.95, {i for i, c in confidences.items() if c >= 0.05})):
        out = tmp_path / f"silver-{target}"
        result = CliRunner().invoke(cli, ["silver", "--run", str(run), "--out", str(out), "--target-precision",
                                          str(target), "--calibration", str(calibration)])
        assert result.exit_code == 0, result.output
        assert set(pq.read_table(out / "silver.parquet").column("id").to_pylist()) == kept
        summary = json.loads((out / "silver-summary.json").read_text())
        assert summary["calibration"]["target_precision"] == target
        assert summary["calibration"]["threshold"] == (top if target == 0.99 else 0.05)
    assert len(confidences) > len({i for i, c in confidences.items() if c >= top})  # the threshold did leave some out
    result = CliRunner().invoke(cli, ["silver", "--run", str(run), "--out", str(tmp_path / "x"),
                                      "--target-precision", "0.999", "--calibration", str(calibration)])
    assert result.exit_code != 0 and "no confidence threshold reaches precision 0.999" in result.output
    result = CliRunner().invoke(cli, ["silver", "--run", str(run), "--out", str(tmp_path / "x"),
                                      "--target-precision", "0.9"])  # the shipped model was checked at 0.95, 0.99
    assert result.exit_code != 0 and "not checked at precision 0.9 over the base" in result.output
    assert "give --calibration DIR" in result.output
    result = CliRunner().invoke(cli, ["silver", "--run", str(run), "--out", str(tmp_path / "x"),
                                      "--calibration", str(calibration)])
    assert result.exit_code == 2 and "give both" in result.output


def test_silver_command_in_process(data_dir: Path, local_kb, tmp_path: Path, monkeypatch) -> None:
    real = kifqa.api.open_pipeline
    monkeypatch.setattr(kifqa.api, "open_pipeline",
                        lambda *, settings=None, **_: real(settings=settings, kb=local_kb, llm=scripted(data_dir)))
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(TEST_CACHE))  # the built base the rows' queries are executed on
    qs = load_sqwd(data_dir, "valid", limit=3)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"u{i}", "question": q.text}) + "\n" for i, q in enumerate(qs))
                      + '{"id": "bad"}\n')
    out = tmp_path / "silver"
    # the scripted model drafts without reading the prompt: the fixed examples spare embedding the whole train pool
    result = CliRunner().invoke(cli, ["silver", str(corpus), "--out", str(out), "--concurrency", "2",
                                      "--examples", "fixed"])
    assert result.exit_code == 0, result.output
    table = pq.read_table(out / "silver.parquet")
    assert table.column("id").to_pylist() == ["u0", "u1", "u2"]
    assert table.column("answers").to_pylist() == [["Q1010"], ["Q14949730"], ["Q40348"]]
    summary = json.loads((out / "silver-summary.json").read_text())
    assert summary["questions"] == 4 and summary["errors"] == 1  # the row without a question
    result = CliRunner().invoke(cli, ["silver", "--out", str(out)])
    assert result.exit_code == 2 and "either CORPUS or --run" in result.output
