"""Where corpora and run folders live: URIs stay URIs from the command line and job configs to the job,
and what kifqa records of a location holds no credential."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import kifqa.batch
from kifqa.cli import cli
from kifqa.config import Settings
from kifqa.errors import ConfigError
from kifqa.runs import RunFolder, read_corpus
from kifqa.runs.manifest import new_manifest
from kifqa.runs.storage import is_uri, shown
from tests.unit.test_cli_run import _summary


def test_a_uri_is_shown_without_its_credentials() -> None:
    assert shown("s3://AKIA123:s3cret@bucket/runs/x?region=eu-west-1&secret_key=s3cret") == "s3://bucket/runs/x"
    assert shown("gs://bucket/q.parquet") == "gs://bucket/q.parquet"
    assert shown("file:///data/q.jsonl") == "/data/q.jsonl" and shown(Path("q.jsonl")) == str(Path("q.jsonl").absolute())
    assert is_uri("s3://b/k") and not is_uri("file:///x") and not is_uri(Path("s3:/b/k")) and not is_uri("runs/x")


def test_uris_pass_unchanged_from_the_command_line_and_the_config(tmp_path: Path, monkeypatch) -> None:
    seen = {}
    monkeypatch.setattr(kifqa.batch, "run_job", lambda settings, *, progress: seen.update(s=settings) or _summary())
    result = CliRunner().invoke(cli, ["run", "s3://bucket/q.parquet", "--out", "s3://bucket/runs/x", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert (seen["s"].batch.corpus, seen["s"].batch.out) == ("s3://bucket/q.parquet", "s3://bucket/runs/x")

    config = tmp_path / "job.yaml"
    config.write_text("batch:\n  corpus: gs://bucket/q.jsonl\n  out: gs://bucket/runs/y\n")
    settings = Settings.load(config)
    assert (settings.batch.corpus, settings.batch.out) == ("gs://bucket/q.jsonl", "gs://bucket/runs/y")

    missing = CliRunner().invoke(cli, ["run", str(tmp_path / "nowhere.jsonl"), "--no-progress"])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_a_run_folder_at_a_uri_is_scored_only_with_out() -> None:
    result = CliRunner().invoke(cli, ["eval", "--run", "s3://bucket/runs/x", "--dataset", "sqwd:valid"])
    assert result.exit_code == 2 and "--run at a URI needs --out" in result.output


def test_an_unknown_scheme_or_a_missing_corpus_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nosuch://bucket/q.jsonl: cannot open this location"):
        read_corpus("nosuch://bucket/q.jsonl")
    with pytest.raises(ConfigError, match="no such corpus file"):
        read_corpus(tmp_path / "q.jsonl")
    with pytest.raises(ConfigError, match="cannot open this location"):
        RunFolder("nosuch://bucket/runs/x")


def test_the_manifest_names_locations_without_credentials(tmp_path: Path) -> None:
    corpus = tmp_path / "q.jsonl"
    corpus.write_text('{"id": "q1", "question": "who?"}\n')
    settings = Settings().override(batch={"corpus": "s3://AKIA123:s3cret@bucket/q.jsonl",
                                          "out": "s3://AKIA123:s3cret@bucket/runs/x"})
    manifest = new_manifest(settings, read_corpus(corpus), "key", 1, None)
    assert "s3cret" not in json.dumps(manifest) and "AKIA123" not in json.dumps(manifest)
    assert manifest["config"]["batch"]["out"] == "s3://***@bucket/runs/x"  # where it is, and that a key was given
