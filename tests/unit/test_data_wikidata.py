"""Reading the data folder: every problem is a DataError that names the file and KIFQA_DATA_DIR."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kifqa.data import paths, wikidata
from kifqa.data.text import index_key, name_key, question_key, spellings, typed_key
from kifqa.errors import DataError
from kifqa.kb import rdf

DirMaker = Callable[..., Path]


def test_missing_folder_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="KIFQA_DATA_DIR") as err:
        wikidata.load(tmp_path / "nowhere")
    assert "nowhere" in str(err.value)


def test_missing_file_is_named(tiny_data_dir: DirMaker) -> None:
    root = tiny_data_dir()
    (root / paths.PROPERTIES).unlink()
    with pytest.raises(DataError, match="properties_en.json is missing.*KIFQA_DATA_DIR"):
        wikidata.load(root)


def test_malformed_json(tiny_data_dir: DirMaker) -> None:
    root = tiny_data_dir()
    (root / paths.ITEM_LABELS).write_text('{"Q1": ["x"],')
    with pytest.raises(DataError, match="entity_labels_en.json is not valid JSON"):
        wikidata.load(root)


@pytest.mark.parametrize(("line", "message"), [
    ("Q1\tP10", "expected subject<TAB>property<TAB>value"),
    ("X1\tP10\tQ3", "subject 'X1' is not"),
    ("Q1\tP999\tQ3", "property 'P999' is not in"),
])
def test_bad_triple_line_is_located(tiny_data_dir: DirMaker, tiny_data: dict[str, Any], line: str,
                                    message: str) -> None:
    root = tiny_data_dir()
    with open(root / paths.TRIPLES, "a") as f:
        f.write(line + "\n")
    with pytest.raises(DataError, match=message) as err:
        wikidata.load(root)
    assert f":{len(tiny_data['triples']) + 1}:" in str(err.value)


@pytest.mark.parametrize(("property", "value"), [("P10", "not-an-item"), ("P12", "heavy"), ("P13", "yesterday"),
                                                  ("P14", "no url")])
def test_value_must_fit_the_datatype(tiny_data_dir: DirMaker, tiny_data: dict[str, Any], property: str,
                                     value: str) -> None:
    tiny_data["triples"] = [("Q1", property, value)]
    dataset = wikidata.load(tiny_data_dir(tiny_data))
    with pytest.raises(DataError, match=f"does not fit property {property}"):
        list(rdf.lines(dataset))


def test_unknown_datatype(tiny_data_dir: DirMaker, tiny_data: dict[str, Any]) -> None:
    tiny_data["properties"][0]["datatype"] = "wikibase-banana"
    with pytest.raises(DataError, match="unknown datatype 'wikibase-banana'"):
        wikidata.load(tiny_data_dir(tiny_data))


def test_names_drop_placeholders_and_duplicates(tiny_data_dir: DirMaker, tiny_data: dict[str, Any]) -> None:
    tiny_data["items"] = {"Q1": ["No label defined", "Ceres", "CERES", "  Ceres  (planet) ", ""],
                          "Q5": ["No label defined"]}
    items = wikidata.load(tiny_data_dir(tiny_data)).items
    assert items["Q1"] == wikidata.ItemRecord(id="Q1", label="Ceres", aliases=("Ceres (planet)",))
    assert items["Q5"].label == ""


def test_normalize_ignores_case_accents_and_spacing() -> None:
    assert index_key("  Beyoncé  KNOWLES ") == index_key("beyonce knowles") == "beyonce knowles"


def test_names_and_questions_compare_without_apostrophes() -> None:
    assert name_key("Mark O’Hara") == name_key("mark ohara") == "mark ohara"
    assert typed_key("The Devil's Daughter") == typed_key("the devils daughter") == "the devils daughter"
    assert question_key("Mickey Finn's T-Rex") == "mickey finn s t rex"  # where the question's runs of words lie
    assert name_key("Gridlock'd") != name_key("Gridlock")


@pytest.mark.parametrize(("text", "label"), [
    ("james brown", "James Brown"), ("the silence of the lambs", "The Silence of the Lambs"),
    ("half-life 2", "Half-Life 2"), ("antoine de févin", "Antoine de Févin"), ("Swedish", "Swedish"),
    ("The Beatles", "the beatles"), ("of mice and men", "Of mice and men")])
def test_a_name_is_asked_in_the_spellings_labels_use(text: str, label: str) -> None:
    assert label in spellings(text) and len(spellings(text)) == len(set(spellings(text))) <= 5


def test_digest_follows_content_and_version(tiny_data_dir: DirMaker, tiny_data: dict[str, Any]) -> None:
    root = tiny_data_dir()
    first = paths.inputs_digest(root, "1")
    assert paths.inputs_digest(root, "1") == first
    assert paths.inputs_digest(root, "2") != first
    (root / paths.ITEM_LABELS).write_text(json.dumps({**tiny_data["items"], "Q9": ["New"]}))
    assert paths.inputs_digest(root, "1") != first
