"""The dataset loaders on the real files of the data folder, and gold corpora in JSONL/CSV/Parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kifqa.data.dbpedia_map import DBpediaLinks
from kifqa.data.ids import same_id
from kifqa.errors import DataError
from kifqa.eval.datasets import GoldExtender, GoldRelation, load_gold, load_gold_file, load_simpledbpediaqa, load_sqwd
from kifqa.kb import dbpedia
from kifqa.runs.corpus import read_corpus


def test_sqwd_valid(data_dir: Path) -> None:
    qs = load_sqwd(data_dir, "valid")
    assert len(qs) == 2821 and len({q.id for q in qs}) == 2821  # 2,820 newlines: the last line has none
    first = qs[0]
    assert (first.id, first.topic, first.property, first.answer, first.text) == (
        "sqwd-valid-0", "Q318926", "P19", "Q1010", "where was sasha vujačić born")
    assert first.relations == (GoldRelation(property="P19", direction="forward"),) and not first.inverse
    inverse = qs[1]  # Q2568216 R57 Q14949730: the statement is (Q14949730, P57, Q2568216)
    assert inverse.inverse and inverse.pid == "P57"
    assert inverse.relations == (GoldRelation(property="P57", direction="backward"),)
    assert inverse.gold_answers == {"Q14949730"}
    assert all(q.property[0] in "PR" and q.topic.startswith("Q") for q in qs)


def test_sqwd_train_and_limit(data_dir: Path) -> None:
    assert len(load_sqwd(data_dir, "train")) == 19481
    assert [q.id for q in load_sqwd(data_dir, "train", limit=3)] == ["sqwd-train-0", "sqwd-train-1", "sqwd-train-2"]


def test_sqwd_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="KIFQA_DATA_DIR"):
        load_sqwd(tmp_path, "valid")


def test_simpledbpediaqa_valid(data_dir: Path) -> None:
    qs = load_simpledbpediaqa(data_dir, "valid")
    assert len(qs) == 4305 and len({q.id for q in qs}) == 4305
    first = qs[0]
    assert first.id == "sdbqa-valid-00002" and first.text == "where was sasha vujačić born"
    assert first.topic == "http://dbpedia.org/resource/Sasha_Vujačić"
    assert first.relations == (GoldRelation(property="http://dbpedia.org/ontology/birthPlace", direction="forward"),)
    assert first.gold_answers == frozenset() and not first.sqwd_style
    album = next(q for q in qs if q.id == "sdbqa-valid-00022")  # two alternative predicates, class constraint
    assert album.relations == (
        GoldRelation(property="http://purl.org/linguistics/gold/hypernym", direction="backward", constraint="http://dbpedia.org/ontology/Album"),
        GoldRelation(property="http://dbpedia.org/ontology/type", direction="backward", constraint="http://dbpedia.org/ontology/Album"))
    assert album.inverse and album.property == "http://purl.org/linguistics/gold/hypernym"
    assert all(q.relations and q.topic.startswith("http://dbpedia.org/resource/") for q in qs)
    assert sum(len(q.relations) > 1 for q in qs) == 898
    assert {r.direction for q in qs for r in q.relations} == {"forward", "backward"}


def test_simpledbpediaqa_gold_is_the_converted_wikidata_answer_of_the_same_question(data_dir: Path) -> None:
    qs = load_simpledbpediaqa(data_dir, limit=300)
    conversion = dbpedia.convert(data_dir)  # what the DBpedia build records in its manifest
    links = DBpediaLinks(resources=conversion.resources, properties=conversion.property_map)
    extender = GoldExtender(data_dir, dbpedia_links=lambda: links)
    gold = {q.text: extender.gold(q) for q in qs}
    # "where was sasha vujačić born" is SimpleQuestions-Wikidata's (Q318926, P19, Q1010): P19 is dbo:birthPlace
    assert gold["where was sasha vujačić born"] == {"http://dbpedia.org/resource/Maribor"}
    assert all(a.startswith("http://dbpedia.org/resource/") for answers in gold.values() for a in answers)
    sqwd = {" ".join(q.text.lower().split()) for q in load_sqwd(data_dir, "valid")}
    assert not any(gold[q.text] for q in qs if " ".join(q.text.lower().split()) not in sqwd)
    assert 100 <= sum(map(bool, gold.values())) < 134  # 134 shared texts; unconverted properties have no gold
    # the (property, direction) pairs of the subject in the DBpedia conversion (the slices of the report)
    topics = {q.id: extender.topic_relations(q.topic) for q in qs}
    assert topics["sdbqa-valid-00002"] == 1  # Sasha Vujačić: dbo:birthPlace
    assert topics["sdbqa-valid-00014"] == 0  # Irving Langmuir: no converted statement
    assert topics["sdbqa-valid-00290"] == 3  # Turkey
    assert extender.topic_relations("Q313185") == 2  # Fritz Leiber: child, and author of


def test_extension_on_the_real_data(data_dir: Path) -> None:
    qs = {q.id: q for q in load_sqwd(data_dir, "valid")}
    ext = GoldExtender(data_dir)
    # 'Bayonne, New Jersey' names two items; the people born in the other one count too.
    assert ext.gold(qs["sqwd-valid-482"]) == {"Q310944", "Q535794"}
    # the topic has no English label: 'No label defined' is not a name, nothing is added
    assert ext.gold(qs["sqwd-valid-350"]) == {"Q93204"}
    assert ext.gold(qs["sqwd-valid-0"]) == {"Q1010"}


def test_names_and_labels(data_dir: Path) -> None:
    ext = GoldExtender(data_dir)
    assert ext.names("Q318926")[0] == "Sasha Vujačić"
    assert ext.names("Q10339444") == []  # only the placeholder
    assert ext.names("http://dbpedia.org/resource/Clyde,_Missouri") == ["Clyde, Missouri", "Clyde"]
    assert ext.property_label("P19") == "place of birth"
    assert ext.property_label("http://dbpedia.org/ontology/birthPlace") == "birthPlace"


def test_same_id() -> None:
    assert same_id("Q42", "http://www.wikidata.org/entity/Q42")
    assert same_id("http://dbpedia.org/resource/Sasha_Vuja%C4%8Di%C4%87", "<http://dbpedia.org/resource/Sasha_Vujačić>")
    assert not same_id("Q42", "Q43")


def test_dataset_specs(data_dir: Path) -> None:
    assert [q.id for q in load_gold("sqwd:valid", data_dir, limit=2)] == ["sqwd-valid-0", "sqwd-valid-1"]
    assert load_gold("sqwd:train", data_dir, limit=1)[0].id == "sqwd-train-0"
    assert load_gold("sdbqa:valid", data_dir, limit=1)[0].id == "sdbqa-valid-00002"
    assert load_gold("simpledbpediaqa:valid", data_dir, limit=1)[0].dataset == "sdbqa:valid"
    assert load_gold("sqwd", data_dir, limit=1)[0].id == "sqwd-valid-0"
    # --start: ids keep their position; the limit counts from there
    assert [q.id for q in load_gold("sqwd:valid", data_dir, start=200, limit=2)] == ["sqwd-valid-200", "sqwd-valid-201"]
    assert len(load_gold("sqwd:valid", data_dir, start=2800)) == 21
    with pytest.raises(DataError, match="unknown split"):
        load_gold("sqwd:test", data_dir)
    with pytest.raises(DataError, match="unknown dataset"):
        load_gold("webqsp:valid", data_dir)


def test_gold_jsonl(tmp_path: Path, data_dir: Path) -> None:
    path = tmp_path / "gold.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "question": "where was sasha vujačić born", "answers": ["Q1010"], "topic": "Q318926",
         "property": "P19"},
        {"id": "b", "question": "what is a film directed by wiebke von carolsfeld", "answers": ["Q14949730"],
         "topic": "Q2568216", "property": "R57"},
        {"id": "c", "question": "who founded it", "answer": "Q1", "property": "http://x/founder",
         "direction": "backward"},
    ]) + "\n")
    a, b, c = load_gold(str(path), data_dir)
    assert (a.id, a.gold_answers, a.relations) == ("a", {"Q1010"}, (GoldRelation(property="P19", direction="forward"),))
    assert b.inverse and GoldExtender(data_dir).gold(b) == {"Q14949730"}
    assert c.relations == (GoldRelation(property="http://x/founder", direction="backward"),) and c.gold_answers == {"Q1"}


def test_gold_file_extended_only_on_request(tmp_path: Path, data_dir: Path) -> None:
    """A gold file keeps its answers; the local base's namesakes join them only with extend_other."""
    path = tmp_path / "gold.jsonl"
    path.write_text(json.dumps({"id": "x", "question": "Who was born in bayonne, new jersey?", "answers": ["Q310944"],
                                "topic": "Q812589", "property": "R19"}) + "\n")
    [q] = load_gold(str(path), data_dir)
    assert GoldExtender(data_dir).gold(q) == {"Q310944"}
    # as sqwd-valid-482 is extended: 'Bayonne, New Jersey' names two items
    assert GoldExtender(data_dir, extend_other=True).gold(q) == {"Q310944", "Q535794"}


def test_gold_csv_and_tsv(tmp_path: Path) -> None:
    path = tmp_path / "gold.csv"
    path.write_text('id,question,answers\nq1,who is it,Q1|Q2\nq2,"what, then",["Q3"]\nq3,none?,\n')
    qs = load_gold_file(path)
    assert [(q.id, q.gold_answers) for q in qs] == [("q1", {"Q1", "Q2"}), ("q2", {"Q3"}), ("q3", frozenset())]
    tsv = tmp_path / "gold.tsv"
    tsv.write_text("question\tanswers\nwho\tQ5\n")
    [q] = load_gold_file(tsv)
    assert q.id == "q000001" and q.gold_answers == {"Q5"}


def test_gold_parquet_without_ids(tmp_path: Path) -> None:
    path = tmp_path / "gold.parquet"
    pq.write_table(pa.table({"question": ["one?", "two?", "three?"], "answers": [["Q1"], ["Q2", "Q3"], []]}), path)
    qs = load_gold_file(path, limit=2)
    assert [(q.id, q.gold_answers) for q in qs] == [("q000001", {"Q1"}), ("q000002", {"Q2", "Q3"})]


def test_gold_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "answers": ["Q1"]}\n')
    with pytest.raises(DataError, match="row 1 has no question"):
        load_gold_file(bad)
    with pytest.raises(DataError, match="unknown corpus format"):
        load_gold_file(tmp_path / "gold.xml")
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    with pytest.raises(DataError, match="row 1: broken JSON"):
        load_gold_file(broken)
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"id": "a", "question": "one?"}\n{"question": "two?"}\n')
    with pytest.raises(DataError, match="row 2: missing id"):  # some rows have ids: every row needs one
        load_gold_file(missing)


@pytest.mark.parametrize("ids", [False, True])
def test_a_gold_file_numbers_and_names_its_rows_as_the_corpus_reader_does(tmp_path: Path, ids: bool) -> None:
    """Blank lines: a gold file's questions get the ids ``kifqa run`` gives the same file, so that a
    run on it scores against it."""
    rows = [{"question": "one?", "answers": ["Q1"]}, {"question": "two?", "answers": ["Q2"]}]
    if ids:
        rows = [{"id": 7, **rows[0]}, {"id": "b", **rows[1]}]
    path = tmp_path / "gold.jsonl"
    path.write_text("\n" + json.dumps(rows[0]) + "\n\n  \n" + json.dumps(rows[1]) + "\n")
    gold = [q.id for q in load_gold_file(path)]
    assert gold == [q.id for q in read_corpus(path).questions()]
    assert gold == (["7", "b"] if ids else ["q000002", "q000005"])
