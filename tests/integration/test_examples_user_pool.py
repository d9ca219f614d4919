"""A user's example pool over the DBpedia-encoded base (a real Virtuoso): the run draws its examples from that pool,
and the trace says so."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from kifqa.config import ExamplesSettings
from kifqa.data.sqwd import read_sqwd
from kifqa.examples import open_examples
from kifqa.kb import dbpedia
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.llm.gold import GoldLLM
from kifqa.pipeline import Pipeline
from kifqa.types import Question
from tests.dbpedia_fixtures import needs_virtuoso

POOL = 200


def _pool_file(path: Path, data_dir: Path, build: dbpedia.DBpediaBuild) -> Path:
    """The first :data:`POOL` training questions whose gold triple the DBpedia build holds, as a pool file of its
    ids (resource and ontology property IRIs)."""
    links, rows = build.links(), []
    for row in read_sqwd(data_dir, "train"):
        resource, prop = links.resources.get(row.topic), links.properties.get("P" + row.property[1:])
        if resource and prop:
            rows.append({"question": row.question, "entity": resource, "property": prop,
                         "direction": "backward" if row.property.startswith("R") else "forward"})
        if len(rows) == POOL:
            break
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@needs_virtuoso
def test_a_run_over_dbpedia_with_a_user_pool_draws_its_examples_from_it(
        tmp_path: Path, data_dir: Path, dbpedia_build: dbpedia.DBpediaBuild, dbpedia_kb: KifKnowledgeBase) -> None:
    path = _pool_file(tmp_path / "pool.jsonl", data_dir, dbpedia_build)
    settings = ExamplesSettings(pool=str(path), clusters=8)
    examples = open_examples(settings, data_dir=data_dir, cache_dir=tmp_path, kb_spec=dbpedia_kb.spec)
    pool = examples.origin
    assert (pool.name, len(pool.examples), pool.errors) == (str(path), POOL, ())
    pipeline = Pipeline(kb=dbpedia_kb, llm=GoldLLM(pool.examples), examples=examples)
    asked = pool.examples[:3]
    results = [asyncio.run(pipeline.answer(Question(f"q{i}", e.question))) for i, e in enumerate(asked)]
    questions = {e.question for e in pool.examples}
    for example, result in zip(asked, results):
        trace = result.trace
        assert trace.pool == pool.label and pool.label.startswith(f"{path}@")
        assert trace.examples and set(trace.examples) <= questions and example.question not in trace.examples
        assert [str(p) for p in trace.draft][0].replace(" ", "") == example.draft.replace(" ", "")
