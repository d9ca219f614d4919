"""Run folders that survive crashes and hold off a second run: a shard cut short is set aside and recomputed,
stray files are ignored, and a second run into a folder that a run holds stops before it touches a file.

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
