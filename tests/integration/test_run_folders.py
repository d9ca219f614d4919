"""Run folders that survive crashes and hold off a second run: a shard cut short or with bytes overwritten is set
aside and recomputed, so is a garbled manifest, stray files are ignored, a second run into a folder that a run holds
stops before it touches a file, a runtime-only change resumes, and ``--no-resume`` moves finished work aside.

The jobs run on a real local Ray cluster with the doubles of ``test_batch_job.py`` (an instant model and KB).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray

from kifqa.batch import run_job
from kifqa.errors import ConfigError
from kifqa.eval.sources import evaluate_run
from kifqa.report.sources import load_folder
from kifqa.runs import RunFolder, read_run
from kifqa.runs.lock import FolderInUse
from tests.integration.test_batch_job import _corpus, _settings, fakes


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _rows(out: Path) -> tuple[list[str], list[str]]:
    """The question ids of the run's traces and answer rows, as kifqa's readers read them."""
    folder = RunFolder(out)
    return (folder.read_traces(["question_id"])["question_id"].to_pylist(),
            folder.read_answers(["question_id"])["question_id"].to_pylist())


def _cut(path: Path) -> None:
    """Cuts ``path`` to half its size, as a crash of a disk that lost the end of a write would."""
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_a_shard_cut_short_is_set_aside_and_recomputed_and_every_later_command_works(
        cluster, tmp_path: Path, flags: Path, caplog: pytest.LogCaptureFixture) -> None:
    corpus, out = _corpus(tmp_path, 40), tmp_path / "out"
    (flags / "fail-q3").touch()
    first = run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    assert first.ok and first.questions == 40

    _cut(out / "traces" / "shard-00001.parquet")
    _cut(out / "answers" / "shard-00002.parquet")
    (out / "answers" / "shard-00003.parquet").unlink()
    (out / "traces" / "shard-00000 (copy).parquet").write_bytes((out / "traces" / "shard-00000.parquet").read_bytes())
    with caplog.at_level(logging.WARNING, logger="kifqa.runs.folder"):
        folder = RunFolder(out)
        assert folder.finished() == {0}
        assert folder.count_answers() == 9 and len(folder.read_traces()) == 10
    said = caplog.text
    assert "shard-00000 (copy).parquet: not a shard file: ignored" in said
    assert "traces/shard-00001.parquet: unreadable traces file" in said
    assert "traces/shard-00002.parquet: unreadable answers file" in said
    assert "traces/shard-00003.parquet: its answers file shard-00003.parquet is missing" in said

    resumed = run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    assert resumed.ok and (resumed.ran, resumed.shards_skipped, resumed.questions) == (30, 1, 40)
    traces, answers = _rows(out)
    assert sorted(traces) == sorted(f"q{i}" for i in range(40)), "every question traced exactly once"
    assert sorted(answers) == sorted(f"q{i}" for i in range(40) if i != 3), "no answer row lost or doubled"
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["index"] for s in manifest["runs"][-1]["set_aside"]] == [1, 2, 3]
    moved = sorted(p.name for p in (out / "set-aside").rglob("*.parquet"))
    assert {stat.S_IMODE(p.stat().st_mode) for p in (out / "set-aside").rglob("*")} == {0o700, 0o600}
    assert moved == ["answers-shard-00001.parquet", "answers-shard-00002.parquet", "traces-shard-00001.parquet",
                     "traces-shard-00002.parquet", "traces-shard-00003.parquet"]

    (flags / "fail-q3").unlink()
    retried = run_job(_settings(tmp_path, retry_failed=True), corpus, out, progress=False, **fakes(flags))
    assert (retried.ran, retried.answered, retried.errors) == (1, 40, 0)
    assert len(read_run(out)) == 40
    assert evaluate_run(out, [], None).run is not None
    figures, rows, kind = load_folder(out)
    assert kind == "run" and len(rows) == 40


def _overwrite(path: Path) -> None:
    """Overwrites the middle half of ``path``'s pages with zeros and leaves its Parquet footer as it was (a bad
    sector, a faulty copy): the footer still reads."""
    data = bytearray(path.read_bytes())
    pages = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    data[pages // 4: pages * 3 // 4] = bytes(pages * 3 // 4 - pages // 4)
    path.write_bytes(bytes(data))


def test_a_shard_with_bytes_overwritten_mid_file_is_set_aside_and_recomputed(
        cluster, tmp_path: Path, flags: Path, caplog: pytest.LogCaptureFixture) -> None:
    corpus, out = _corpus(tmp_path, 30), tmp_path / "out"
    assert run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags)).ok
    _overwrite(out / "traces" / "shard-00001.parquet")
    _overwrite(out / "answers" / "shard-00002.parquet")
    assert pq.read_metadata(out / "traces" / "shard-00001.parquet").num_rows == 10, "the footer reads as before"

    with caplog.at_level(logging.WARNING, logger="kifqa.runs.folder"):
        resumed = run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    assert resumed.ok and (resumed.ran, resumed.shards_skipped, resumed.questions) == (20, 1, 30)
    said = caplog.text
    assert f"{out}: shard 1 is set aside to {out}/set-aside/" in said
    assert "the traces file changed since it was written (its checksum differs)" in said
    assert "the answers file shard-00002.parquet changed since it was written (its checksum differs)" in said
    traces, answers = _rows(out)
    assert sorted(traces) == sorted(answers) == sorted(f"q{i}" for i in range(30))
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["index"] for s in manifest["runs"][-1]["set_aside"]] == [1, 2]
    assert sorted(p.name for p in (out / "set-aside").rglob("*.parquet")) == [
        "answers-shard-00001.parquet", "answers-shard-00002.parquet", "traces-shard-00001.parquet",
        "traces-shard-00002.parquet"], "moved, not deleted"
    assert len(read_run(out)) == 30


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "no-resume"])
@pytest.mark.parametrize("garbled", [b'{"job_key": "0123', b'["a", "list"]\n'], ids=["not-json", "a-list"])
def test_a_garbled_manifest_is_set_aside_and_the_run_goes_on(
        cluster, tmp_path: Path, flags: Path, caplog: pytest.LogCaptureFixture, garbled: bytes, resume: bool) -> None:
    corpus, out = _corpus(tmp_path, 20), tmp_path / "out"
    assert run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags)).ok
    (out / "manifest.json").write_bytes(garbled)

    with caplog.at_level(logging.WARNING, logger="kifqa.runs.folder"):
        summary = run_job(_settings(tmp_path, resume=resume), corpus, out, progress=False, **fakes(flags))
    assert summary.ok and summary.questions == 20 and summary.ran == (0 if resume else 20)
    [aside] = (out / "set-aside").glob("*/manifest.json")
    assert aside.read_bytes() == garbled
    assert f"{out}: manifest.json is set aside to {aside.parent}: it is not a JSON object (" in caplog.text
    manifest = RunFolder(out).read_manifest()
    assert manifest is not None and manifest["status"] == "finished"
    [entry] = manifest["runs"][-1]["set_aside"]
    assert entry["index"] is None and entry["moved_to"] == str(aside.parent)
    assert entry["reason"].startswith("it is not a JSON object (")


def test_resume_after_an_out_of_memory_fix_keeps_the_finished_shards(cluster, tmp_path: Path, flags: Path) -> None:
    corpus, out = _corpus(tmp_path, 20), tmp_path / "out"
    settings = _settings(tmp_path).override(llm={"extra": {"gpu_memory_utilization": 0.9}})
    assert run_job(settings, corpus, out, progress=False, **fakes(flags)).ok
    fixed = settings.override(llm={"extra": {"gpu_memory_utilization": 0.8, "max_num_seqs": 64}},
                              data_dir=tmp_path / "copy-of-the-data", batch={"llm_actor_concurrency": 16})
    again = run_job(fixed, corpus, out, progress=False, **fakes(flags))
    assert again.ok and (again.ran, again.shards_skipped) == (0, 2)
    for answers_differ in ({"llm": {"model": "qwen2.5-coder-0.5b"}}, {"llm": {"extra": {"dtype": "float16"}}}):
        with pytest.raises(ConfigError, match="holds the output of another job"):
            run_job(fixed.override(**answers_differ), corpus, out, progress=False, **fakes(flags))
    assert len(RunFolder(out).finished()) == 2


def test_no_resume_moves_the_finished_shards_aside_and_says_where(
        cluster, tmp_path: Path, flags: Path, caplog: pytest.LogCaptureFixture) -> None:
    corpus, out = _corpus(tmp_path, 20), tmp_path / "out"
    assert run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags)).ok
    before = (out / "manifest.json").read_bytes()

    with caplog.at_level(logging.WARNING, logger="kifqa.runs.folder"):
        fresh = run_job(_settings(tmp_path, resume=False), corpus, out, progress=False, **fakes(flags))
    assert fresh.ok and fresh.ran == 20
    [previous] = out.glob("previous-*")
    assert f"{out}: --no-resume: the previous run's 2 shards and its manifest are moved to {previous}" in caplog.text
    assert sorted(p.name for p in (previous / "traces").iterdir()) == ["shard-00000.parquet", "shard-00001.parquet"]
    assert (previous / "manifest.json").read_bytes() == before
    assert len(read_run(previous)) == 20, "the previous run reads as a run folder of its own"
    assert {stat.S_IMODE(p.stat().st_mode) for p in [previous, *previous.rglob("*")]} == {0o700, 0o600}
    manifest = RunFolder(out).read_manifest()
    assert manifest is not None and manifest["runs"][-1]["previous_moved_to"] == str(previous)
    assert len(manifest["runs"]) == 1 and len(read_run(out)) == 20


def test_run_folders_are_private(cluster, tmp_path: Path, flags: Path) -> None:
    out = tmp_path / "out"
    run_job(_settings(tmp_path), _corpus(tmp_path, 12), out, progress=False, **fakes(flags))
    paths = [out, *out.rglob("*")]
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in paths if p.is_dir()} == {"0o700"}
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in paths if p.is_file()} == {"0o600"}


def test_a_failed_manifest_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = RunFolder(tmp_path / "out")
    folder.create()

    def full_disk(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(os, "replace", full_disk)
        with pytest.raises(OSError, match="No space"):
            folder.write_manifest({"job_key": "k"})
    assert sorted(p.name for p in folder.root.iterdir()) == ["answers", "traces"], "the temporary file is gone"
    (folder.root / ".tmp-0123-manifest.json").write_text("{")  # a crash's leftover
    folder.remove_temporaries()
    assert sorted(p.name for p in folder.root.iterdir()) == ["answers", "traces"]


def test_a_second_run_into_a_held_folder_stops_and_the_first_finishes_intact(
        cluster, tmp_path: Path, flags: Path) -> None:
    corpus, out = _corpus(tmp_path, 120), tmp_path / "out"
    script = tmp_path / "driver.py"
    script.write_text(
        "import sys, ray\n"
        f"sys.path[:0] = [{str(Path(__file__).parents[2])!r}]\n"
        "import tests.integration.test_batch_job as t\n"
        f"ray.init(address={cluster!r}, log_to_driver=False)\n"
        "ray.cloudpickle.register_pickle_by_value(t)\n"
        f"s = t.run_job(t._settings(t.Path({str(tmp_path)!r}), max_tasks=1), {str(corpus)!r}, {str(out)!r},"
        f" progress=False, **t.fakes(t.Path({str(flags)!r}), llm_delay=0.05))\n"
        "assert s.ok, s\n")
    driver = subprocess.Popen([sys.executable, str(script)], cwd=Path(__file__).parents[2])
    try:
        deadline = time.time() + 120
        while len(RunFolder(out).finished()) < 1:
            assert driver.poll() is None and time.time() < deadline, "the first run ended early"
            time.sleep(0.1)
        for resume in (True, False):
            with pytest.raises(FolderInUse, match=rf"{out} is in use by another run \(pid {driver.pid} on "):
                run_job(_settings(tmp_path, resume=resume), corpus, out, progress=False, **fakes(flags))
        assert driver.wait(timeout=300) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
    traces, answers = _rows(out)
    assert sorted(traces) == sorted(f"q{i}" for i in range(120)) and sorted(answers) == sorted(traces)
    manifest = RunFolder(out).read_manifest()
    assert manifest is not None and manifest["status"] == "finished" and len(manifest["runs"]) == 1
    assert pq.read_metadata(out / "traces" / "shard-00011.parquet").num_rows == 10
