"""A small real evaluation: the real pipeline on the built local KB with a scripted model (drafts chosen
per question to hit each failure class), scored in-process and from a batch-shaped run folder, with
the report and its plots; ``kifqa eval`` on both paths."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from click.testing import Result as Invocation

import kifqa.api
from kifqa.cli import cli
from kifqa.config import PipelineSettings
from kifqa.eval.datasets import GoldExtender, load_sqwd
from kifqa.eval.evaluation import About, Evaluation
from kifqa.eval.report import PLOTS
from kifqa.eval.sources import evaluate, evaluate_run
from kifqa.examples.pool import open_pool
from kifqa.llm.base import Usage
from kifqa.pipeline import Pipeline
from kifqa.report.sources import write_evaluation
from kifqa.runs import ANSWER_SCHEMA, TRACE_SCHEMA
from kifqa.types import Result
from tests.fakes import ScriptedLLM

N = 14

#: Draft per question (by its position in sqwd:valid) and, where the relation step asks the model, its pick.
DRAFTS = {
    0: "(sasha vujačić | place of birth | ?x)",
    1: "(?x | director | wiebke von carolsfeld)",       # near match: the model picks option 1
    2: "(seymour parker gilbert | occupation | ?x)",
    3: "(french city | place of death | ?x)",            # draft: the wrong unknown
    4: "(jamie hewlett | job | ?x)",
    5: "(ghost house | country | ?x)",
    6: "(yamakinkaru film | country of origin | ?x)",    # large: only "film" is found, film genres, 415 backlinks
    7: "(fritz leiber | relative | ?x)",                 # relation: the model picks option 2
    8: "(marcy rae | occupation | ?x)",
    9: "(bill hosket, jr. | position | ?x)",
    10: "(third man | country of origin | ?x)",          # entity: found but not kept
    11: "Sure! The answer is Spyglass.",                 # draft: malformed
    12: None,                                            # error: the model call fails
    13: "(weird war | genre | ?x)",
}
EXPECTED = {3: "draft", 6: "large", 7: "relation", 10: "entity", 11: "draft", 12: "error"}


def scripted(data_dir: Path) -> ScriptedLLM:
    qs = load_sqwd(data_dir, "valid", limit=N)
    return ScriptedLLM({qs[i].text: d for i, d in DRAFTS.items()}, picks={qs[7].text: "2"},
                       usage=Usage(prompt_tokens=120, completion_tokens=12, latency_s=0.05))


@pytest.fixture(scope="module")
def evaluation(data_dir: Path, local_kb) -> Evaluation:
    questions = load_sqwd(data_dir, "valid", limit=N)
    # The drafts and picks hit each failure class with the steps of their time: a widened name, and a clear
    # lead taken without the model, would answer questions 7 and 10 right.
    settings = PipelineSettings(widen_known=False, sure_lead=None)
    pipeline = Pipeline(kb=local_kb, llm=scripted(data_dir), settings=settings)
    ev = asyncio.run(evaluate(pipeline, questions, GoldExtender(data_dir), concurrency=4))
    ev.about = About(dataset="sqwd:valid", model="scripted", kb="local")
    return ev


@pytest.fixture(scope="module")
def written(evaluation: Evaluation, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eval")
    write_evaluation(evaluation, out)
    return out


def test_scores_and_failure_classes(evaluation: Evaluation) -> None:
    failures = {int(s.gold.id.rsplit("-", 1)[1]): s.failure for s in evaluation.scored}
    assert {i: f for i, f in failures.items() if f} == EXPECTED
    by_id = {s.gold.id: s for s in evaluation.scored}
    assert by_id["sqwd-valid-0"].prediction.answers == {"Q1010": "Maribor"}
    assert "wrong unknown" in by_id["sqwd-valid-3"].detail
    assert by_id["sqwd-valid-10"].detail == "found by the search but not kept"
    m = evaluation.metrics()
    assert m["questions"] == N and m["correct"] == N - len(EXPECTED)
    assert m["failure_counts"] == {"error": 1, "draft": 2, "large": 1, "entity": 1, "relation": 1,
                                   "empty": 0, "partial": 0}
    assert m["linking"]["entity"]["correct"] == N - 5  # draft (2), entity (2) and error lose the topic
    assert m["linking"]["relation"]["correct"] == N - 6
    assert m["all"]["macro_f1"] == pytest.approx((N - len(EXPECTED)) / N, abs=1e-4)
    assert m["latency_s"]["total"]["n"] == N and m["latency_s"]["relations"]["n"] == N - 2  # two fail at the draft
    assert {e["id"] for e in m["failure_examples"]["entity"]} == {"sqwd-valid-10"}
    assert {e["id"] for e in m["failure_examples"]["large"]} == {"sqwd-valid-6"}
    assert m["by_property"][0]["property"] in {"P106", "P495"} and m["by_property"][0]["questions"] == 3


def test_slices_by_the_topics_relations_in_the_base(evaluation: Evaluation) -> None:
    """Only sqwd-valid-7's topic (Fritz Leiber) has several (property, direction) pairs in the base."""
    slices = evaluation.metrics()["slices"]
    assert list(slices) == ["one_relation", "several_relations", "topic_named", "topic_not_named"]
    several, one = slices["several_relations"], slices["one_relation"]
    assert several["questions"] == 1 and several["failure_counts"]["relation"] == 1
    assert several["linking"]["relation"]["accuracy"] == 0.0 and several["all"]["macro_f1"] == 0.0
    assert one["questions"] == N - 1 and one["correct"] == N - len(EXPECTED)
    assert one["failure_counts"]["relation"] == 0 and one["failure_counts"]["entity"] == 1
    assert one["failure_counts"]["large"] == 1
    assert "calibration" not in one and "failure_examples" not in one


def test_slices_by_whether_the_question_names_its_topic(evaluation: Evaluation, written: Path) -> None:
    """sqwd-valid-1 writes "wiebke von carolsfeld" for Wiebke Carolsfeld (found as a near match) and sqwd-valid-11
    "spyglass entertainment" for Spyglass Media Group (lost); the other twelve name their topic."""
    slices = evaluation.metrics()["slices"]
    named, not_named = slices["topic_named"], slices["topic_not_named"]
    assert not_named["questions"] == 2 and not_named["correct"] == 1 and not_named["failure_counts"]["draft"] == 1
    assert named["questions"] == N - 2 and named["correct"] == N - len(EXPECTED) - 1
    rows = {r["id"]: r for r in map(json.loads, (written / "questions.jsonl").read_text().splitlines())}
    assert [i for i, r in rows.items() if r["names_topic"] is False] == ["sqwd-valid-1", "sqwd-valid-11"]
    table = CliRunner().invoke(cli, ["eval", "--table", str(written)]).output.splitlines()
    header, cells = [c.strip() for c in table[0].split("|")], [c.strip() for c in table[2].split("|")]
    assert cells[header.index("topic not named")] == "2"
    assert cells[header.index("F1, topic named")] == f"{(N - len(EXPECTED) - 1) / (N - 2):.3f}"


def test_calibration_of_the_confidence(evaluation: Evaluation) -> None:
    m = evaluation.metrics()
    cal = m["calibration"]
    answered = [s for s in evaluation.scored if s.predicted]
    assert cal["questions"] == N and cal["answered"] == len(answered)
    assert m["answered"]["questions"] == sum(s.has_gold for s in answered)
    top = cal["curve"][-1]  # the lowest threshold keeps every answered question
    assert top["n"] == len(answered) and top["precision"] == pytest.approx(
        sum(s.score.precision for s in answered) / len(answered), abs=1e-4)
    assert [p["threshold"] for p in cal["curve"]] == sorted({p["threshold"] for p in cal["curve"]}, reverse=True)
    assert cal["held_out"]["fit_questions"] == 7 and cal["held_out"]["check_questions"] == 7


def test_report_and_plots(written: Path, evaluation: Evaluation) -> None:
    import matplotlib.image

    m = json.loads((written / "metrics.json").read_text())
    report = (written / "report.md").read_text()
    for png in PLOTS:
        assert f"]({png})" in report
        image = matplotlib.image.imread(written / png)
        assert image.shape[0] > 300 and image.shape[1] > 600  # a real figure, not an empty canvas
        assert image[..., :3].std() > 0.05
    assert f"| all | {N} | {m['all']['macro_precision']:.3f} |" in report
    assert "| draft | 2 | 14.3% | malformed: 1; wrong unknown: 1 |" in report or \
        "| draft | 2 | 14.3% | wrong unknown: 1; malformed: 1 |" in report
    assert "`sqwd-valid-11`" in report and "| `P106` | occupation | 3 |" in report
    assert "| topic with several | 1 | 1 |" in report and "## Calibration of the silver confidence" in report
    obvious = m["decisions"]["obvious"]  # the ranking's obvious option, taken without the model
    assert obvious["fired"] == obvious["taken"] > 0 and f"| obvious | {obvious['fired']} | {obvious['taken']} |" in report
    rows = [json.loads(x) for x in (written / "questions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [s.gold.id for s in evaluation.scored]
    assert rows[0]["labels"] == {"Q1010": "Maribor"} and rows[0]["trace"]["relations"][0]["property"] == "P19"


def write_run(folder: Path, results: list[Result]) -> Path:
    """``results`` as a batch run folder (the job's schemas, two shards)."""
    for name in ("answers", "traces"):
        (folder / name).mkdir(parents=True)
    for i, part in enumerate((results[:7], results[7:])):
        pq.write_table(pa.Table.from_pylist([row for r in part for row in r.answer_rows()], schema=ANSWER_SCHEMA),
                       folder / "answers" / f"shard-{i:05d}.parquet")
        pq.write_table(pa.Table.from_pylist([r.trace.to_row() for r in part], schema=TRACE_SCHEMA),
                       folder / "traces" / f"shard-{i:05d}.parquet")
    return folder


@pytest.fixture(scope="module")
def run_folder(evaluation: Evaluation, tmp_path_factory) -> Path:
    return write_run(tmp_path_factory.mktemp("run") / "run", [s.result for s in evaluation.scored])


def test_run_folder_scores_the_same(run_folder: Path, evaluation: Evaluation, data_dir: Path) -> None:
    from_run = evaluate_run(run_folder, load_sqwd(data_dir, "valid"), GoldExtender(data_dir))
    assert [s.gold.id for s in from_run.scored] == [s.gold.id for s in evaluation.scored]
    assert [(s.score, s.failure, s.detail, s.linking) for s in from_run.scored] == \
        [(s.score, s.failure, s.detail, s.linking) for s in evaluation.scored]
    a, b = from_run.metrics(), evaluation.metrics()
    for key in ("all", "single_answer", "linking", "failure_counts", "by_property", "llm_calls_per_question",
                "decisions"):
        assert a[key] == b[key], key


def test_eval_command_on_a_run_folder(run_folder: Path, evaluation: Evaluation, data_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    result = CliRunner().invoke(cli, ["eval", "--run", str(run_folder), "--dataset", "sqwd:valid"])
    assert result.exit_code == 0, result.output
    m = json.loads((run_folder / "metrics.json").read_text())
    assert m["all"] == evaluation.metrics()["all"] and m["questions"] == N
    assert all((run_folder / png).is_file() for png in PLOTS) and (run_folder / "report.md").is_file()


def test_eval_command_in_process(data_dir: Path, local_kb, monkeypatch, tmp_path: Path) -> None:
    real = kifqa.api.open_pipeline
    monkeypatch.setattr(kifqa.api, "open_pipeline",
                        lambda *, settings=None, **_: real(settings=settings, kb=local_kb, llm=scripted(data_dir)))
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    result = CliRunner().invoke(cli, ["eval", "--dataset", "sqwd:valid", "--limit", "4", "--concurrency", "2",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["questions"] == 4 and m["correct"] == 3 and m["failure_counts"]["draft"] == 1
    assert m["dataset"] == "sqwd:valid" and m["concurrency"] == 2
    assert len((tmp_path / "questions.jsonl").read_text().splitlines()) == 4
    assert (tmp_path / "report.md").is_file()


def test_partial_run_counts_questions_without_trace_as_errors(evaluation: Evaluation, data_dir: Path,
                                                              tmp_path: Path, monkeypatch) -> None:
    """A run whose second shard never finished: its 7 corpus questions are errors, and the report says so."""
    import hashlib

    from kifqa.eval.sources import write_corpus

    run = write_run(tmp_path / "run", [s.result for s in evaluation.scored])
    for name in ("answers", "traces"):
        (run / name / "shard-00001.parquet").unlink()
    corpus = write_corpus([s.gold for s in evaluation.scored], run / "corpus.jsonl")
    manifest = {"corpus": {"path": str(corpus), "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest(),
                           "questions": N},
                "config": {"batch": {"id_column": "id", "question_column": "question"}}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    result = CliRunner().invoke(cli, ["eval", "--run", str(run), "--dataset", "sqwd:valid"])
    assert result.exit_code == 0, result.output
    m = json.loads((run / "metrics.json").read_text())
    assert m["questions"] == N and m["run_missing"] == 7 and m["run_questions"] == 7
    missing = [s for s in evaluation.scored[7:]]
    assert m["failure_counts"]["error"] == 7 + sum(s.failure == "error" for s in evaluation.scored[:7])
    assert m["all"]["macro_f1"] == pytest.approx(sum(s.score.f1 for s in evaluation.scored[:7]) / N, abs=1e-4)
    assert "**7 of these questions have no trace in the run**" in (run / "report.md").read_text()
    rows = {r["id"]: r for r in map(json.loads, (run / "questions.jsonl").read_text().splitlines())}
    assert all(rows[s.gold.id]["error_step"] == "missing" for s in missing)

    corpus.unlink()  # the corpus is gone: only the count of the missing questions is known
    result = CliRunner().invoke(cli, ["eval", "--run", str(run), "--dataset", "sqwd:valid", "--no-report"])
    assert result.exit_code == 0, result.output
    m = json.loads((run / "metrics.json").read_text())
    assert m["questions"] == 7 and m["run_missing"] == 0 and m["run_missing_unscored"] == 7


def test_gold_drafts_are_written_as_the_example_pool_writes_them(data_dir: Path) -> None:
    from kifqa.data.pool import sqwd_pool
    from kifqa.eval.oracle import gold_drafts

    questions = load_sqwd(data_dir, "valid", limit=60)
    drafts = gold_drafts(questions, GoldExtender(data_dir))
    pool = {e.question: e.draft for e in sqwd_pool(data_dir, split="valid", limit=60)}
    assert len(drafts) >= 55
    assert all(pool[q.text] == drafts[q.id] for q in questions if q.id in drafts)
    assert drafts["sqwd-valid-0"] == "(sasha vujačić | place of birth | ?x)"
    assert drafts["sqwd-valid-1"].startswith("(?x | director | ")  # R57: the question asks for the subject


def test_oracle_drafts_split_the_loss_by_step(data_dir: Path, local_kb, monkeypatch, tmp_path: Path) -> None:
    real = kifqa.api.open_pipeline
    llm = scripted(data_dir)
    monkeypatch.setattr(kifqa.api, "open_pipeline",
                        lambda *, settings=None, **_: real(settings=settings, kb=local_kb, llm=llm))
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    monkeypatch.setenv("KIFQA_PIPELINE__WIDEN_KNOWN", "false")  # as in the evaluation fixture
    monkeypatch.setenv("KIFQA_PIPELINE__SURE_LEAD", "10")
    result = CliRunner().invoke(cli, ["eval", "--dataset", "sqwd:valid", "--limit", str(N), "--oracle-drafts",
                                      "--out", str(tmp_path), "--no-report"])
    assert result.exit_code == 0, result.output
    m = json.loads((tmp_path / "metrics.json").read_text())
    oracle = m["oracle_drafts"]
    assert oracle["questions"] == N and oracle["macro_f1"] == pytest.approx((N - len(EXPECTED)) / N, abs=1e-4)
    # the gold drafts fix the malformed, failed and wrong-unknown drafts and the misspelt names
    assert oracle["macro_f1_oracle_drafts"] >= oracle["macro_f1"] + 4 / N - 1e-4
    assert oracle["loss"]["draft"] == pytest.approx(oracle["macro_f1_oracle_drafts"] - oracle["macro_f1"], abs=1e-4)
    assert sum(oracle["loss"].values()) == pytest.approx(1 - oracle["macro_f1"], abs=1e-3)
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "oracle-drafts" / "questions.jsonl").read_text().splitlines())}
    assert len(rows) == N and "oracle-drafts" not in str(m.get("run", ""))
    for qid in ("sqwd-valid-11", "sqwd-valid-12"):  # the model's draft was malformed / failed: the gold one is used
        trace = rows[qid]["trace"]
        assert [a["oracle"] for a in trace["attempts"]] == [True]
        assert "draft" not in [c["step"] for c in trace["llm_calls"]] and rows[qid]["failure"] != "draft"
    assert rows["sqwd-valid-0"]["trace"]["draft_output"] == "(sasha vujačić | place of birth | ?x)"


def test_eval_records_its_pool_and_refuses_one_that_holds_its_questions(data_dir: Path, local_kb, monkeypatch,
                                                                        tmp_path: Path) -> None:
    """A user's pool holding sqwd-valid-0 (written otherwise: case, punctuation): evaluating it with sqwd-valid-1
    (half of them in the pool) is refused unless allowed, and then metrics.json and the table say so; a question
    outside the pool is scored plainly."""
    first = load_sqwd(data_dir, "valid", limit=1)[0]
    rows = [{"question": first.text.upper() + " ?", "entity": "Q1010", "property": "P19",
             "entity_label": "Sasha Vujačić", "property_label": "place of birth"},
            {"question": "who wrote the hobbit", "entity": "Q74287", "property": "P50", "entity_label": "The Hobbit",
             "property_label": "author"}]
    pool_file = tmp_path / "mine.jsonl"
    pool_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pool = open_pool(str(pool_file), data_dir=data_dir)
    real = kifqa.api.open_pipeline
    monkeypatch.setattr(kifqa.api, "open_pipeline",
                        lambda *, settings=None, **_: real(settings=settings, kb=local_kb, llm=scripted(data_dir)))
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    monkeypatch.setenv("KIFQA_EXAMPLES__POOL", str(pool_file))

    def run(out: str, *args: str) -> Invocation:
        return CliRunner().invoke(cli, ["eval", "--dataset", "sqwd:valid", "--examples", "retrieved", "--no-report",
                                        "--out", str(tmp_path / out), *args])

    refused = run("refused", "--limit", "2")
    assert refused.exit_code == 2, refused.output
    assert f"1 of the 2 questions of sqwd:valid to evaluate are in the example pool {pool.label} (sqwd-valid-0), " \
        "more than the 5%" in refused.output and "--allow-pool-overlap" in refused.output
    assert not (tmp_path / "refused").exists()

    for out, args in (("overlap", ("--limit", "2", "--allow-pool-overlap")), ("clean", ("--start", "1", "--limit", "1"))):
        result = run(out, *args)
        assert result.exit_code == 0, result.output
    overlap, clean = (json.loads((tmp_path / out / "metrics.json").read_text()) for out in ("overlap", "clean"))
    assert overlap["pool"] == {"name": str(pool_file), "digest": pool.digest, "examples": 2, "overlap": 1,
                               "over_limit": True}
    assert clean["pool"] == {**overlap["pool"], "overlap": 0, "over_limit": False}
    traces = [json.loads(line)["trace"] for line in (tmp_path / "overlap" / "questions.jsonl").read_text().splitlines()]
    assert [t["pool"] for t in traces] == [pool.label] * 2

    table = CliRunner().invoke(cli, ["eval", "--table", str(tmp_path / "overlap"), "--table", str(tmp_path / "clean")])
    header, _, *lines = table.output.strip().splitlines()
    column = [c.strip() for c in header.split("|")].index("pool")
    assert [[c.strip() for c in line.split("|")][column] for line in lines] == [
        f"mine.jsonl@{pool.digest[:8]} (1 in pool, over 5%)", f"mine.jsonl@{pool.digest[:8]}"]
