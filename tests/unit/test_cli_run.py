"""``kifqa run``: options become settings; the summary is printed; failed shards fail the command."""

from __future__ import annotations

from click.testing import CliRunner

import kifqa.batch
from kifqa.batch import Summary
from kifqa.cli import cli


def _summary(**changes) -> Summary:
    fields = dict(out="/o", questions=3, answered=2, empty=0, errors=1, input_errors=1, answers=4, ran=3,
                  shards=1, shards_skipped=0, shards_failed=[], startup_s=1.0, seconds=2.0, questions_per_s=1.5,
                  llm_calls_per_question=1.0, prompt_tokens_per_question=100.0,
                  completion_tokens_per_question=10.0, kb_calls_per_question=3.0, kb_cache_hit_rate=0.5,
                  llm_busy_share=0.9)
    return Summary(**(fields | changes))


def test_options_override_the_config(tmp_path, monkeypatch):
    seen = {}

    def fake_run_job(settings, *, progress):
        seen.update(settings=settings, progress=progress)
        return _summary()

    monkeypatch.setattr(kifqa.batch, "run_job", fake_run_job)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("")
    config = tmp_path / "job.yaml"
    config.write_text("batch:\n  shard_size: 7\n  kb_actors: 3\n  out: from-config\n")
    result = CliRunner().invoke(cli, ["run", str(corpus), "--out", str(tmp_path / "out"), "--config", str(config),
                                      "--kb", "wikidata", "--llm-actors", "2", "--no-resume", "--no-progress"])
    assert result.exit_code == 0, result.output
    s = seen["settings"]
    assert (s.batch.corpus, s.batch.out) == (corpus, tmp_path / "out")
    assert (s.batch.shard_size, s.batch.kb_actors, s.batch.llm_actors) == (7, 3, 2)
    assert (s.batch.resume, s.batch.retry_failed, s.kb.spec, seen["progress"]) == (False, False, "wikidata", False)
    assert "questions 3: 2 answered, 0 empty, 1 errors (1 bad input)" in result.output


def test_failed_shards_fail_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(kifqa.batch, "run_job", lambda settings, progress: _summary(shards_failed=[4]))
    result = CliRunner().invoke(cli, ["run", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "FAILED    shards [4]" in result.output
