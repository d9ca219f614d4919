"""Silver data a team can publish: field-form queries executed again on real bases, a release folder that the real
``datasets`` package loads (locally and from an S3-compatible server), and ``--recheck`` against a changed base."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kifqa.cli import cli
from kifqa.config import Settings
from kifqa.eval.confidence_fit import checked_threshold, default_model
from kifqa.eval.datasets import load_sqwd
from kifqa.eval.recheck import read_release, recheck
from kifqa.eval.reexecute import reexecute
from kifqa.eval.release import Provenance, split_of, write_release
from kifqa.kb.build import build
from kifqa.kb.fieldform import field_query
from kifqa.kb.spec import open_kb
from kifqa.types import Direction, Relation
from tests.conftest import TEST_CACHE
from tests.s3_server import s3_server

Maker = Callable[..., Settings]

#: Every relation of the tiny base with its answers: each datatype forward, an item backward.
RELATIONS: list[tuple[str, str, Direction]] = [
    ("Q1", "P10", "forward"), ("Q2", "P10", "forward"), ("Q1", "P11", "forward"), ("Q1", "P12", "forward"),
    ("Q1", "P13", "forward"), ("Q1", "P14", "forward"), ("Q5", "P10", "forward"), ("Q3", "P10", "backward"),
]


async def _answers(settings: Settings) -> list[list[str]]:
    """What KIF's filters answer for each of :data:`RELATIONS` on the base of ``settings``."""
    kb = open_kb("local", settings)
    try:
        found = [await kb.facts(e, p, d) for e, p, d in RELATIONS]
    finally:
        await kb.aclose()
    return [sorted(f.value if d == "forward" else f.subject for f in r.facts)
            for r, (_, _, d) in zip(found, RELATIONS)]


async def _reexecuted(settings: Settings, queries: list[tuple[str, list[str]]]) -> list[Any]:
    kb = open_kb("local", settings)
    try:
        return await reexecute(kb, queries)
    finally:
        await kb.aclose()


def _rows(answers: list[list[str]]) -> list[dict[str, Any]]:
    """Silver-shaped rows, one per relation of the tiny base, with the answers KIF gave."""
    return [{"id": f"r{i}", "question": f"what is {p} of {e}?", "draft": [], "logical_form": "",
             "query": field_query([Relation(e, p, d)]), "relations": [
                 {"entity": e, "entity_label": "", "property": p, "property_label": "", "direction": d}],
             "constraints": [], "kif_filter": [], "kif_sparql": [], "answers": a, "answer_labels": a,
             "n_answers": len(a), "confidence": 1.0, "confidence_entity": 1.0, "confidence_relation": 1.0,
             "confidence_constraints": 1.0, "confidence_answers": 1.0, "notes": [], "kb": "local", "model": "m"}
            for i, ((e, p, d), a) in enumerate(zip(RELATIONS, answers))]


def _provenance(**changes: Any) -> Provenance:
    return Provenance(**{"corpus": "tiny", "kb": "local", "endpoint": "the local build", "model": "m",
                         "kifqa_version": "0", "date": "2026-12-05", **changes})


def test_field_queries_give_what_kif_filters_give_for_every_datatype(tiny_settings: Maker) -> None:
    settings = tiny_settings()
    build(settings)
    answers = asyncio.run(_answers(settings))
    assert all(answers) and answers[-1] == ["Q1", "Q2"]
    checks = asyncio.run(_reexecuted(settings, [(field_query([Relation(*r)]), a) for r, a in zip(RELATIONS, answers)]))
    assert [c.error for c in checks] == [""] * len(RELATIONS)
    assert all(c.reproduced for c in checks), [(r, sorted(c.found), sorted(c.expected))
                                               for r, c in zip(RELATIONS, checks) if not c.reproduced]
    # and a query that does not give its row's answers is told apart
    wrong = asyncio.run(_reexecuted(settings, [(field_query([Relation("Q2", "P10", "forward")]), ["Q4"])]))[0]
    assert not wrong.reproduced and wrong.added == {"Q3"} and wrong.removed == {"Q4"}


def test_recheck_reports_exactly_the_rows_whose_statements_changed(tiny_settings: Maker, tiny_data: dict[str, Any],
                                                                   tmp_path: Path) -> None:
    before = tiny_settings()
    build(before)
    rows = _rows(asyncio.run(_answers(before)))
    write_release(rows, tmp_path / "release", _provenance())
    released = read_release(tmp_path / "release")
    assert sorted(r["id"] for r in released) == sorted(r["id"] for r in rows)

    unchanged = asyncio.run(_recheck(before, released))
    assert {r["recheck"] for r in unchanged.rows} == {"same"}  # every released query re-executes to its answers

    changed = {("Q1", "P11", "HIP 71683"): ("Q1", "P11", "HIP 99999"), ("Q1", "P12", "2.18"): ("Q1", "P12", "3.5"),
               ("Q1", "P13", "1689-12-01"): ("Q1", "P13", "1690-01-01")}
    tiny_data["triples"] = [changed.get(tuple(t), t) for t in tiny_data["triples"]]
    after = tiny_settings(tiny_data, name="changed")
    build(after)
    result = asyncio.run(_recheck(after, released))
    by_id = {r["id"]: r for r in result.rows}
    assert sorted(i for i, r in by_id.items() if r["recheck"] != "same") == ["r2", "r3", "r4"]
    assert (by_id["r2"]["added"], by_id["r2"]["removed"]) == (["HIP 99999"], ["HIP 71683"])
    assert by_id["r3"]["answers_now"] == ["3.5"] and result.counts() == {"same": 5, "changed": 3, "failed": 0}
    assert "r2\tchanged\t+1 -1" in result.render()


async def _recheck(settings: Settings, rows: list[dict[str, Any]]) -> Any:
    kb = open_kb("local", settings)
    try:
        return await recheck(rows, kb)
    finally:
        await kb.aclose()


def test_no_topic_crosses_splits_even_through_shared_entities() -> None:
    def row(i: int, *entities: str) -> dict[str, Any]:
        return {"id": str(i), "relations": [{"entity": e} for e in entities]}

    rows = [row(i, f"Q{i}") for i in range(200)] + [row(1000, "Q1", "Q2"), row(1001, "Q2", "Q3"), row(1002)]
    splits = split_of(rows)
    assert set(splits) == {"train", "validation", "test"}
    by_entity: dict[str, set[str]] = {}
    for r, s in zip(rows, splits):
        for rel in r["relations"]:
            by_entity.setdefault(rel["entity"], set()).add(s)
    assert all(len(s) == 1 for s in by_entity.values())
    assert len({splits[1], splits[2], splits[3], splits[200], splits[201]}) == 1  # joined through Q2


def _gold_answering(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Settings that answer with the gold model over the test run's local build; the corpus of valid 0-699."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    for name, value in {"KIFQA_DATA_DIR": str(data_dir), "KIFQA_CACHE_DIR": str(TEST_CACHE),
                        "KIFQA_EXAMPLES__MODE": "fixed", "KIFQA_LLM__BACKEND": "gold", "KIFQA_LLM__CACHE": ""}.items():
        monkeypatch.setenv(name, value)
    corpus = tmp_path / "valid.jsonl"
    corpus.write_text("".join(json.dumps({"id": q.id, "question": q.text}) + "\n"
                              for q in load_sqwd(data_dir, "valid", limit=700)))
    return corpus


def test_a_release_of_valid_0_699_loads_with_datasets(settings: Settings, data_dir: Path, built_kb: Any,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = _gold_answering(data_dir, tmp_path, monkeypatch)
    release = tmp_path / "release"
    result = CliRunner().invoke(cli, ["silver", str(corpus), "--out", str(tmp_path / "silver"),
                                      "--concurrency", "16", "--release", str(release)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    meta = json.loads((release / "release.json").read_text())
    loaded = datasets.load_dataset(str(release), cache_dir=str(tmp_path / "hf"))  # never an earlier test's cache
    assert {name: loaded[name].num_rows for name in loaded} == meta["splits"]
    assert sum(meta["splits"].values()) > 600 and meta["folded"] >= 0
    assert set(loaded["train"].column_names) >= {"question", "query", "answers", "kif_sparql", "confidence", "split"}
    card = (release / "README.md").read_text()
    assert card.startswith("---\nlicense: cc0-1.0\n") and "| model | gold" in card and "| source corpus |" in card
    topics = {name: {r["entity"] for rels in loaded[name]["relations"] for r in rels} for name in loaded}
    assert not topics["train"] & topics["test"] and not topics["train"] & topics["validation"]
    questions = [q for name in loaded for q in loaded[name]["question"]]
    assert len(questions) == len(set(questions))
    checked = CliRunner().invoke(cli, ["silver", "--recheck", str(release)], catch_exceptions=False)
    assert checked.exit_code == 0, checked.output
    counts = json.loads((release / "recheck" / "recheck.json").read_text())
    assert counts["same"] == counts["rows"] == sum(meta["splits"].values())  # 100 % re-execute to their answers


def test_a_target_precision_keeps_rows_by_the_shipped_confidences_held_out_check(
        settings: Settings, data_dir: Path, built_kb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a calibration run, ``--target-precision`` keeps the rows above the threshold the shipped confidence's
    held-out check chose for the base, and the card says where its precision was measured."""
    corpus = _gold_answering(data_dir, tmp_path, monkeypatch)
    shipped = default_model()
    assert shipped is not None, "kifqa ships its fitted confidence"
    chosen = checked_threshold(shipped, "local", 0.99)
    release = tmp_path / "release"
    result = CliRunner().invoke(cli, ["silver", str(corpus), "--limit", "60", "--out", str(tmp_path / "silver"),
                                      "--target-precision", "0.99", "--release", str(release)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    meta = json.loads((release / "release.json").read_text())
    assert meta["calibration"]["threshold"] == chosen["threshold"] and "held-out questions over local" in meta[
        "calibration"]["source"]
    kept = [c for name in meta["splits"] for c in pq.read_table(release / "data" / f"{name}.parquet")["confidence"].to_pylist()]
    summary = json.loads((tmp_path / "silver" / "silver-summary.json").read_text())
    assert kept and min(kept) >= chosen["threshold"] and summary["below_threshold"] > 0
    card = (release / "README.md").read_text()
    assert f"confidence >= {chosen['threshold']}, the threshold chosen for precision 0.99" in card
    assert f"measured precision {chosen['precision']} at coverage {chosen['coverage']}" in card
    assert "rated by: fitted logistic regression" in card


def test_a_release_on_object_storage_reads_back(tiny_settings: Maker) -> None:
    settings = tiny_settings()
    build(settings)
    rows = _rows(asyncio.run(_answers(settings)))
    rows.append({**rows[0], "id": "dup", "question": rows[0]["question"].upper() + " ", "confidence": 0.5})
    with s3_server() as s3:
        release = write_release(rows, s3.uri("releases/tiny"), _provenance(kb="local-dbpedia"))
        stored = s3.objects("releases/tiny")
        assert set(stored) == {"releases/tiny/README.md", "releases/tiny/release.json",
                               *(f"releases/tiny/data/{s}.parquet" for s in ("train", "validation", "test"))}
        assert stored["releases/tiny/README.md"].decode().startswith("---\nlicense: cc-by-sa-3.0\n")
        back = read_release(s3.uri("releases/tiny"))
    assert release.folded == 1 and sorted(r["id"] for r in back) == sorted(r["id"] for r in rows[:-1])
