"""Example pools: the built-ins, a user's pool file checked row by row, the base's own pool by default, and caches
keyed by a pool's content."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kifqa.config import ExamplesSettings
from kifqa.data.pool import SDBQA_HELD_OUT, sdbqa_pool
from kifqa.data.sdbqa import read_sdbqa
from kifqa.errors import ConfigError
from kifqa.examples import open_examples
from kifqa.examples.pool import RowError, open_pool, pool_name, read_pool_file

GOOD = [
    {"question": "where was sasha vujačić born", "entity": "http://dbpedia.org/resource/Sasha_Vujačić",
     "property": "http://dbpedia.org/ontology/birthPlace", "direction": "forward"},
    {"question": "what is a song by john rutter?", "entity": "http://dbpedia.org/resource/John_Rutter",
     "property": "http://dbpedia.org/ontology/musicalArtist", "direction": "backward",
     "property_label": "performer"},
]


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_pool_file_gets_one_error_per_bad_row_naming_the_row_and_field(tmp_path: Path,
                                                                        data_dir: Path) -> None:
    rows = [GOOD[0],
            {**GOOD[0], "question": ""},
            {**GOOD[0], "direction": "sideways"},
            "{not json",
            {**GOOD[0], "entity": "not an id"},
            {"question": "who?", "entity": "Q1"},
            GOOD[1]]
    pool = read_pool_file(_jsonl(tmp_path / "pool.jsonl", rows), data_dir=data_dir)
    assert [(e.row, e.field) for e in pool.errors] == [(2, "question"), (3, "direction"), (4, "row"),
                                                        (5, "entity"), (6, "property")]
    assert str(pool.errors[1]) == "row 3: direction: 'sideways' is neither forward nor backward"
    assert [e.draft for e in pool.examples] == ["(sasha vujačić | birth place | ?x)",
                                                "(?x | performer | john rutter)"]


def test_csv_and_parquet_pools_read_as_jsonl_does_and_wikidata_ids_take_the_data_folders_names(
        tmp_path: Path, data_dir: Path) -> None:
    rows = [{"question": "who is a musician born in detroit", "entity": "Q12439", "property": "P19", "direction": "backward"},
            {"question": "who?", "entity": "Q12439", "property": "P999999999", "direction": "forward"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pool.parquet")
    header = "question,entity,property,direction\n"
    (tmp_path / "pool.csv").write_text(header + "".join(",".join(r.values()) + "\n" for r in rows))
    for name in ("pool.parquet", "pool.csv"):
        pool = read_pool_file(tmp_path / name, data_dir=data_dir)
        assert pool.examples[0].draft == "(?x | place of birth | detroit)"
        assert pool.errors == (RowError(2, "property", "no label known for P999999999: add a property_label column"),)


def test_a_pool_file_with_no_good_row_is_refused(tmp_path: Path, data_dir: Path) -> None:
    with pytest.raises(ConfigError, match="no usable row: row 1: entity: missing or empty"):
        read_pool_file(_jsonl(tmp_path / "pool.jsonl", [{"question": "who?", "property": "P19"}]),
                       data_dir=data_dir)
    with pytest.raises(ConfigError, match="neither a built-in pool"):
        open_pool("pool.txt", data_dir=data_dir)


def test_each_base_gets_its_own_pool_unless_one_is_named() -> None:
    assert [pool_name(None, spec) for spec in ("local", "wikidata", "local-dbpedia", "dbpedia",
                                               "sparql+dbpedia:http://127.0.0.1:1/sparql")] == \
        ["sqwd", "sqwd", "sdbqa", "sdbqa", "sdbqa"]
    assert pool_name("sqwd", "local-dbpedia") == "sqwd"


def test_the_sdbqa_pool_holds_no_held_out_question(data_dir: Path) -> None:
    rows = read_sdbqa(data_dir / "simpledbpediaqa/valid.json")
    shown = {row["Query"].strip() for row in rows[:SDBQA_HELD_OUT]}
    held_out = {row["Query"].strip() for row in rows[SDBQA_HELD_OUT:]} - shown
    pool = sdbqa_pool(data_dir)
    assert len(pool) == SDBQA_HELD_OUT and {e.question for e in pool} <= shown
    assert not held_out & {e.question for e in pool}


def test_two_pools_caches_never_mix(tmp_path: Path, data_dir: Path) -> None:
    """Each pool's embeddings are cached under its content's hash; a changed row is another pool."""
    settings = ExamplesSettings(mode="retrieved", k=1)
    first = _jsonl(tmp_path / "a.jsonl", GOOD)
    second = _jsonl(tmp_path / "b.jsonl", [GOOD[0], {**GOOD[1], "question": "name a song by john rutter"}])
    cache = tmp_path / "cache"
    opened = [open_examples(settings.model_copy(update={"pool": str(p)}), data_dir=data_dir, cache_dir=cache,
                            kb_spec="local-dbpedia") for p in (first, second)]
    assert opened[0].origin.digest != opened[1].origin.digest
    assert len(list((cache / "examples").glob("pool-*.npy"))) == 2
    assert opened[1].select("a song by john rutter")[0].question == "name a song by john rutter"
    assert opened[0].select("a song by john rutter")[0].question == "what is a song by john rutter?"


def test_rules_for_english_and_for_wikidata_follow_the_pool_and_the_base(tmp_path: Path, data_dir: Path) -> None:
    from kifqa.examples.sources import FixedExamples, RetrievedExamples
    from kifqa.pipeline.context import Context

    french = open_pool(str(_jsonl(tmp_path / "pool.jsonl", GOOD)), data_dir=data_dir, language="fr")
    source = RetrievedExamples.__new__(RetrievedExamples)  # no embedding needed: only the pool's language is read
    source.origin = french

    class Base:
        def __init__(self, spec: str) -> None:
            self.spec = spec

    def context(examples: object, spec: str) -> Context:
        return Context("q", Base(spec), None, examples, None, None, None, lambda: None, None)  # type: ignore[arg-type]

    assert (context(FixedExamples(), "local").english, context(source, "local").english) == (True, False)
    assert [context(source, s).wikidata_shaped for s in ("local", "wikidata", "local-dbpedia", "kif:x")] == \
        [True, True, False, False]
