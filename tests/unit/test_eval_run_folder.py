"""Scoring a batch run folder (``kifqa eval --run``): SimpleDBpediaQA questions with hand-made traces
written in the batch job's Parquet schemas (its end-to-end use needs a DBpedia KB)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kifqa.cli import cli
from kifqa.config import Settings
from kifqa.data.pool import SDBQA_HELD_OUT
from kifqa.errors import ConfigError
from kifqa.eval.datasets import load_gold, load_simpledbpediaqa
from kifqa.eval.pools import PoolOverlapError, PoolRecord, checked_pool, traced_pool
from kifqa.examples.pool import open_pool
from kifqa.kb.build import build
from kifqa.kb.dbpedia import DBpediaBuild
from kifqa.runs import ANSWER_SCHEMA, TRACE_SCHEMA, read_run
from kifqa.types import Answer, Candidate, Fact, Pattern, Question, Relation, Result, Trace

DBR, DBO = "http://dbpedia.org/resource/", "http://dbpedia.org/ontology/"


def result(qid: str, text: str, known: str, entity: str, prop: str, direction: str,
           answers: list[tuple[str, str]]) -> Result:
    t = Trace(qid, text, kb="dbpedia", model="hand", draft=[Pattern(known, "p", "?x")],
              candidates=[Candidate(id=entity, label=known.title(), score=3.0)], entities=[entity],
              relations=[Relation(entity, prop, direction)], timings={"draft": 0.2, "total": 1.0},
              n_answers=len(answers))
    facts = [Answer(fact=Fact(subject=entity, subject_label=known, property=prop, property_label=prop.rsplit("/", 1)[-1], value=a, value_label=label), answer=a, answer_label=label) for a, label in answers]
    return Result(Question(qid, text), facts, t)


def write_run(folder: Path, results: list[Result]) -> Path:
    (folder / "answers").mkdir(parents=True)
    (folder / "traces").mkdir()
    pq.write_table(pa.Table.from_pylist([row for r in results for row in r.answer_rows()], schema=ANSWER_SCHEMA),
                   folder / "answers" / "shard-00000.parquet")
    pq.write_table(pa.Table.from_pylist([r.trace.to_row() for r in results], schema=TRACE_SCHEMA),
                   folder / "traces" / "shard-00000.parquet")
    (folder / "manifest.json").write_text(json.dumps({
        "summary": {"seconds": 4.0}, "config": {"llm": {"model": "hand"}, "kb": {"spec": "dbpedia"}}}))
    return folder


@pytest.fixture
def sdbqa_run(tmp_path: Path, data_dir: Path) -> Path:
    """Runs on four real SimpleDBpediaQA questions: right, wrong predicate, wrong entity, no answer;
    and one question that is not in the dataset."""
    q = {x.id: x for x in load_simpledbpediaqa(data_dir, limit=10)}
    sasha, gilbert, fevin, langmuir = (q[f"sdbqa-valid-{i}"] for i in ("00002", "00009", "00012", "00014"))
    return write_run(tmp_path / "run", [
        result(sasha.id, sasha.text, "sasha vujačić", f"{DBR}Sasha_Vuja%C4%8Di%C4%87", f"{DBO}birthPlace", "forward",
               [(f"{DBR}Maribor", "Maribor")]),
        result(gilbert.id, gilbert.text, "seymour parker gilbert", gilbert.topic, f"{DBO}occupation", "forward",
               [(f"{DBR}Lawyer", "Lawyer")]),
        result(fevin.id, fevin.text, "antoine", f"{DBR}Antoine", f"{DBO}deathPlace", "forward", []),
        result(langmuir.id, langmuir.text, "irving langmuir", langmuir.topic, langmuir.relations[0].property,
               langmuir.relations[0].direction, []),
        result("other-1", "not in the dataset", "x", f"{DBR}X", f"{DBO}p", "forward", [("y", "y")]),
    ])


def test_read_run(sdbqa_run: Path) -> None:
    runs = read_run(sdbqa_run)
    assert set(runs) == {"sdbqa-valid-00002", "sdbqa-valid-00009", "sdbqa-valid-00012", "sdbqa-valid-00014", "other-1"}
    p = runs["sdbqa-valid-00002"]
    assert p.answers == {f"{DBR}Maribor": "Maribor"} and p.property_labels == {f"{DBO}birthPlace": "birthPlace"}
    assert p.trace.relations == [Relation(f"{DBR}Sasha_Vuja%C4%8Di%C4%87", f"{DBO}birthPlace", "forward")]
    assert runs["sdbqa-valid-00012"].answers == {}


@pytest.fixture
def dbpedia_links(dbpedia_build: DBpediaBuild, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SimpleDBpediaQA gold reads the DBpedia build's links: the commands find the tests' build."""
    monkeypatch.setenv("KIFQA_CACHE_DIR", str(settings.cache_dir))


@pytest.mark.usefixtures("dbpedia_links")
def test_eval_run_on_simpledbpediaqa(sdbqa_run: Path) -> None:
    result = CliRunner().invoke(cli, ["eval", "--run", str(sdbqa_run), "--dataset", "sdbqa:valid"])
    assert result.exit_code == 0, result.output
    m = json.loads((sdbqa_run / "metrics.json").read_text())
    # three of the four are SimpleQuestions-Wikidata questions too: their converted answers are gold
    assert m["questions"] == 4 and m["answers_scored"] == 3 and m["run_questions_not_in_dataset"] == 1
    assert m["linking"]["entity"] == {"n": 4, "correct": 3, "accuracy": 0.75}  # subject IRI
    assert m["linking"]["relation"] == {"n": 4, "correct": 3, "accuracy": 0.75}  # predicate
    assert m["linking"]["triple"] == {"n": 4, "correct": 2, "accuracy": 0.5}  # both, in one relation
    # the wrong predicate still found the gold answer (dbo:occupation for SimpleDBpediaQA's gold:hypernym)
    assert m["failure_counts"] == {"error": 0, "draft": 0, "large": 0, "entity": 1, "relation": 0,
                                   "empty": 1, "partial": 0}
    assert (m["model"], m["kb"], m["wall_s"]) == ("hand", "dbpedia", 4.0)
    report = (sdbqa_run / "report.md").read_text()
    assert "| subject IRI | 4 | 3 | 0.750 |" in report and "| predicate (with direction) | 4 | 3 | 0.750 |" in report
    for png in ("scores.png", "failures.png", "by_property.png", "latency.png"):
        assert (sdbqa_run / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [json.loads(x) for x in (sdbqa_run / "questions.jsonl").read_text().splitlines()]
    assert [r["failure"] for r in rows] == [None, None, "entity", "empty"]
    assert [r["f1"] for r in rows] == [1.0, 1.0, 0.0, 0.0] and [r["scored"] for r in rows] == [True, True, True, False]


@pytest.mark.usefixtures("dbpedia_links")
def test_eval_run_limit_and_no_match(sdbqa_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored"
    result = CliRunner().invoke(cli, ["eval", "--run", str(sdbqa_run), "--dataset", "sdbqa:valid", "--limit", "2",
                                      "--out", str(out), "--no-report"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "metrics.json").read_text())["questions"] == 2 and not (out / "report.md").exists()
    result = CliRunner().invoke(cli, ["eval", "--run", str(sdbqa_run), "--dataset", "sqwd:valid"])
    assert result.exit_code != 0 and "no question of sqwd:valid" in result.output


@pytest.mark.usefixtures("dbpedia_links")
def test_scored_folders_side_by_side(sdbqa_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored"
    result = CliRunner().invoke(cli, ["eval", "--run", str(sdbqa_run), "--dataset", "sdbqa:valid", "--out", str(out),
                                      "--no-report"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    result = CliRunner().invoke(cli, ["eval", "--table", str(out), "--table", str(out)])
    assert result.exit_code == 0, result.output
    header, rule, *rows = result.output.strip().splitlines()
    assert header.startswith("| run | base | pool | n | macro F1 |") and rule.startswith("| --- | --- | --- | ---: |")
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert len(rows) == 2 and cells[:5] == ["scored", "dbpedia", "–", str(metrics["questions"]),
                                            f"{metrics['all']['macro_f1']:.3f}"], "its traces name no pool"
    assert cells[6] == "–", "no oracle drafts in this folder"
    result = CliRunner().invoke(cli, ["eval", "--table", str(sdbqa_run)])
    assert result.exit_code != 0 and "not a scored evaluation folder" in result.output


@pytest.mark.slow  # builds the hard base from the real data where it is not built (about a minute)
@pytest.mark.usefixtures("dbpedia_links")
def test_hard_gold_is_recorded_and_shown_beside_the_base(sdbqa_run: Path, settings: Settings, tmp_path: Path) -> None:
    build(settings, hard=True)
    out = tmp_path / "scored"
    result = CliRunner().invoke(cli, ["eval", "--run", str(sdbqa_run), "--dataset", "sdbqa:valid", "--out", str(out),
                                      "--no-report", "--hard-gold"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "metrics.json").read_text())["gold"] == "hard base"
    row = CliRunner().invoke(cli, ["eval", "--table", str(out)]).output.strip().splitlines()[2]
    assert [c.strip() for c in row.strip("|").split("|")][1] == "dbpedia (hard base's gold)"


def test_eval_options_conflict(sdbqa_run: Path) -> None:
    result = CliRunner().invoke(cli, ["eval", "--run", str(sdbqa_run), "--batch", "--out", "x"])
    assert result.exit_code == 2 and "one of --batch, --run, --compare and --table" in result.output
    result = CliRunner().invoke(cli, ["eval", "--batch"])
    assert result.exit_code == 2 and "--batch needs --out" in result.output


@pytest.mark.parametrize("examples", ["retrieved", "clustered"])
def test_eval_refuses_the_example_pool_as_its_dataset(examples: str, data_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    result = CliRunner().invoke(cli, ["eval", "--dataset", "sqwd:train", "--examples", examples, "--limit", "1"])
    assert result.exit_code == 2
    assert "1 of the 1 questions of sqwd:train to evaluate are in the example pool sqwd@" in result.output
    assert "evaluate sqwd:valid" in result.output and "--allow-pool-overlap" in result.output


@pytest.mark.parametrize("batch", [False, True])
def test_eval_refuses_sdbqa_questions_its_own_pool_holds(batch: bool, data_dir: Path, monkeypatch,
                                                         tmp_path: Path) -> None:
    """The DBpedia bases' pool is SimpleDBpediaQA valid 0-699: evaluating those questions is refused before any is
    answered (in-process or by the batch job), naming them and what to do."""
    monkeypatch.setenv("KIFQA_DATA_DIR", str(data_dir))
    args = ["eval", "--dataset", "sdbqa:valid", "--kb", "local-dbpedia", "--examples", "retrieved", "--limit", "5"]
    result = CliRunner().invoke(cli, args + (["--batch", "--out", str(tmp_path / "run")] if batch else []))
    assert not (tmp_path / "run").exists()
    assert result.exit_code == 2, result.output
    assert "PoolOverlapError: 5 of the 5 questions of sdbqa:valid to evaluate are in the example pool sdbqa@" \
        in result.output
    ids = [q.id for q in load_simpledbpediaqa(data_dir, limit=5)]
    assert f"({ids[0]}, {ids[1]}, {ids[2]}, … {ids[4]})" in result.output
    assert "--start 700" in result.output and "--allow-pool-overlap" in result.output


def _traced_with(run: Path, pool: str, config: dict[str, object]) -> Path:
    """``run``'s traces as answered with the pool labelled ``pool``, under the settings ``config``."""
    traces = pq.read_table(run / "traces").to_pylist()
    pq.write_table(pa.Table.from_pylist([{**t, "trace": json.dumps({**json.loads(t["trace"]), "pool": pool})}
                                         for t in traces], schema=TRACE_SCHEMA),
                   run / "traces" / "shard-00000.parquet")
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "config": {**manifest["config"], **config}}))
    return run


@pytest.mark.usefixtures("dbpedia_links")
def test_eval_run_checks_the_pool_its_traces_name(sdbqa_run: Path, data_dir: Path, tmp_path: Path) -> None:
    """A run answered with the DBpedia base's own pool (its settings name no other): its questions are in that
    pool, so scoring is refused unless allowed, and then the overlap is recorded."""
    pool = open_pool("sdbqa", data_dir=data_dir)
    run = _traced_with(sdbqa_run, pool.label, {"examples": {"mode": "retrieved"}})
    refused = CliRunner().invoke(cli, ["eval", "--run", str(run), "--dataset", "sdbqa:valid", "--no-report"])
    assert refused.exit_code == 2 and f"4 of the 4 questions of sdbqa:valid to evaluate are in the example pool " \
        f"{pool.label}" in refused.output and "--start 700" in refused.output
    assert not (run / "metrics.json").exists()
    allowed = CliRunner().invoke(cli, ["eval", "--run", str(run), "--dataset", "sdbqa:valid", "--no-report",
                                       "--allow-pool-overlap"])
    assert allowed.exit_code == 0, allowed.output
    assert json.loads((run / "metrics.json").read_text())["pool"] == {
        "name": "sdbqa", "digest": pool.digest, "examples": len(pool.examples), "overlap": 4, "over_limit": True}


@pytest.mark.usefixtures("dbpedia_links")
def test_eval_run_names_a_pool_it_cannot_open_again(sdbqa_run: Path, tmp_path: Path) -> None:
    gone = tmp_path / "gone.jsonl"
    run = _traced_with(sdbqa_run, f"{gone}@0123456789abcdef", {"examples": {"pool": str(gone)}})
    result = CliRunner().invoke(cli, ["eval", "--run", str(run), "--dataset", "sdbqa:valid", "--no-report"])
    assert result.exit_code == 0, result.output
    assert f"the example pool the run answered with ({gone}@0123456789abcdef) cannot be opened again" in result.output
    assert json.loads((run / "metrics.json").read_text())["pool"] == {
        "name": str(gone), "digest": "0123456789abcdef", "examples": None, "overlap": None, "over_limit": None}
    table = CliRunner().invoke(cli, ["eval", "--table", str(run)])
    assert "| gone.jsonl@01234567 (overlap unchecked) |" in table.output


def test_a_run_whose_traces_name_several_pools_is_not_scored_as_one(data_dir: Path) -> None:
    """A run resumed with another pool: its figures would mix two pools."""
    with pytest.raises(ConfigError, match=r"name 2 example pools \(a\.jsonl@01, sdbqa@02\)"):
        traced_pool(["sdbqa@02", "", "a.jsonl@01", "sdbqa@02"], lambda: open_pool("sdbqa", data_dir=data_dir), [],
                    dataset="sdbqa:valid", allow=True)
    assert traced_pool(["", ""], lambda: open_pool("sdbqa", data_dir=data_dir), [], dataset="sdbqa:valid",
                       allow=False) is None, "a run of an older kifqa names none"


def test_the_questions_a_datasets_splits_share_are_counted_not_refused(data_dir: Path) -> None:
    """SimpleQuestions-Wikidata valid shares 66 questions with train word for word, SimpleDBpediaQA valid 700+ 13
    with 0-699 (each answered without its own example): each base's own pool evaluates its report set, the
    overlap recorded. The SimpleDBpediaQA pool is drawn from SimpleQuestions' valid split too: it holds a tenth of
    SimpleQuestions-Wikidata valid, and is refused for it."""
    sqwd, sdbqa = open_pool("sqwd", data_dir=data_dir), open_pool("sdbqa", data_dir=data_dir)
    sqwd_valid = load_gold("sqwd:valid", data_dir)
    held_out = load_gold("sdbqa:valid", data_dir, start=SDBQA_HELD_OUT)
    assert checked_pool(sqwd, sqwd_valid, dataset="sqwd:valid", allow=False) == PoolRecord(
        name="sqwd", digest=sqwd.digest, examples=len(sqwd.examples), overlap=66, over_limit=False)
    assert checked_pool(sdbqa, held_out, dataset="sdbqa:valid", allow=False).overlap == 13
    with pytest.raises(PoolOverlapError, match=r"294 of the 2821 questions of sqwd:valid .* more than the 5%"):
        checked_pool(sdbqa, sqwd_valid, dataset="sqwd:valid", allow=False)
