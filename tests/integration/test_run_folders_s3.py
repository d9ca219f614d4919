"""Corpora and run folders on an object store: a real S3-compatible server (moto's server mode on 127.0.0.1,
``tests/s3_server.py``) reached through pyarrow's S3 file system, pointed at it by ``AWS_ENDPOINT_URL``.

The jobs run on a real local Ray cluster started after the server's environment is set, with the doubles of
``test_batch_job.py`` (an instant model and KB).
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import ray
from click.testing import CliRunner

from kifqa.batch import run_job
from kifqa.cli import cli
from kifqa.errors import ConfigError
from kifqa.eval.datasets import load_sqwd
from kifqa.eval.sources import evaluate_run
from kifqa.report.sources import load_folder
from kifqa.runs import ANSWER_SCHEMA, TRACE_SCHEMA, RunFolder, read_corpus, read_run
from kifqa.runs.lock import FolderInUse, Holder
from kifqa.types import Question, Result, Trace
from tests.integration.test_batch_job import _settings, fakes
from tests.s3_server import SECRET, S3Server, s3_server

REPO = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


@pytest.fixture(scope="module")
def cluster(s3: S3Server) -> Iterator[str]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _lines(n: int) -> bytes:
    return "".join(json.dumps({"id": f"q{i}", "question": f"where was person {i} born"}) + "\n"
                   for i in range(n)).encode()


def _corpus(s3: S3Server, tmp_path: Path, key: str, n: int) -> tuple[str, Path]:
    """The same corpus of ``n`` questions on the server and on the local disk."""
    s3.put(key, _lines(n))
    local = tmp_path / "corpus.jsonl"
    local.write_bytes(_lines(n))
    return s3.uri(key), local


def _rows(out: str | Path) -> tuple[list[str], list[tuple[str, str]]]:
    folder = RunFolder(out)
    answers = folder.read_answers(["question_id", "answer"])
    return (folder.read_traces(["question_id"])["question_id"].to_pylist(),
            sorted(zip(answers["question_id"].to_pylist(), answers["answer"].to_pylist(), strict=True)))


def test_a_corpus_on_the_object_store_reads_as_the_same_file_on_disk(s3: S3Server, tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"who is person {i}, the \"{i}th\"?"} for i in range(2500)]
    rows[7]["question"] = ""
    table = pa.Table.from_pylist(rows)
    files = {"jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode()}
    with io.BytesIO() as parquet:
        pq.write_table(table, parquet, row_group_size=1000)
        files["parquet"] = parquet.getvalue()
    with io.BytesIO() as csv:
        pacsv.write_csv(table, csv)
        files["csv"] = csv.getvalue()
    for fmt, data in files.items():
        (tmp_path / f"q.{fmt}").write_bytes(data)
        s3.put(f"corpora/q.{fmt}", data)
        local, remote = read_corpus(tmp_path / f"q.{fmt}"), read_corpus(s3.uri(f"corpora/q.{fmt}"))
        assert (remote.sha256, len(remote), remote.n_errors) == (local.sha256, 2500, 1), fmt
        assert [r.questions() for r in remote.rows(700)] == [r.questions() for r in local.rows(700)], fmt
        assert remote.path == s3.uri(f"corpora/q.{fmt}")


def test_a_job_on_the_object_store_answers_as_on_disk_and_records_no_secret(
        cluster, s3: S3Server, tmp_path: Path, flags: Path) -> None:
    corpus, local_corpus = _corpus(s3, tmp_path, "corpora/job.jsonl", 45)
    out = s3.uri("runs/job")
    (flags / "fail-q7").touch()
    remote = run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    local = run_job(_settings(tmp_path), local_corpus, tmp_path / "out", progress=False, **fakes(flags))
    assert remote.ok and remote.out == out and (remote.questions, remote.answered, remote.errors) == (45, 44, 1)
    assert (local.questions, local.answered, local.errors) == (45, 44, 1)
    assert _rows(out) == _rows(tmp_path / "out"), "the same answers on the object store as on disk"
    written = s3.objects("runs/job/")
    assert sorted(k.split("/")[2] for k in written) == ["answers"] * 5 + ["manifest.json"] + ["traces"] * 5
    assert not [k for k, data in written.items() if SECRET.encode() in data or b"kifqa-test" in data]
    manifest = RunFolder(out).read_manifest()
    assert manifest is not None and manifest["corpus"]["path"] == corpus and manifest["status"] == "finished"

    again = run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    assert (again.ran, again.shards_skipped) == (0, 5)
    (flags / "fail-q7").unlink()
    retried = run_job(_settings(tmp_path, retry_failed=True), corpus, out, progress=False, **fakes(flags))
    assert (retried.ran, retried.answered, retried.errors) == (1, 45, 0)
    assert len(s3.objects("runs/job/answers/")) == 5, "the replaced answers object is removed"
    traces, answers = _rows(out)
    assert traces == [f"q{i}" for i in range(45)] and len(answers) == 45
    assert len(read_run(out)) == 45 and evaluate_run(out, [], None).run is not None
    assert load_folder(out)[2] == "run"
    page = CliRunner().invoke(cli, ["report", out, "--out", str(tmp_path / "page.html")])
    assert page.exit_code == 0 and (tmp_path / "page.html").stat().st_size > 0, page.output
    no_out = CliRunner().invoke(cli, ["report", out])
    assert no_out.exit_code != 0 and "say where to write its page (--out)" in no_out.output


def test_a_missing_bucket_is_a_clear_error(s3: S3Server) -> None:
    with pytest.raises(ConfigError, match=r"s3://no-such-bucket/runs/x: cannot write here .*bucket exists"):
        RunFolder("s3://no-such-bucket/runs/x").create()


def test_kifqa_eval_scores_a_run_folder_on_the_object_store_as_on_disk(s3: S3Server, data_dir: Path,
                                                                        tmp_path: Path) -> None:
    gold = load_sqwd(data_dir, "valid")[:6]
    results = [Result(Question(q.id, q.text), [], Trace(q.id, q.text, kb="local", model="m", n_answers=0,
                                                        error="no entity", error_step="entities")) for q in gold]
    for where in (s3.uri("runs/scored"), tmp_path / "run"):
        folder = RunFolder(where)
        folder.create()
        for index, part in enumerate((results[:4], results[4:])):
            folder.write_shard(index, pa.Table.from_pylist([], schema=ANSWER_SCHEMA),
                               pa.Table.from_pylist([r.trace.to_row() for r in part], schema=TRACE_SCHEMA))
    metrics = []
    for where, scores in ((s3.uri("runs/scored"), tmp_path / "remote"), (str(tmp_path / "run"), tmp_path / "local")):
        done = CliRunner().invoke(cli, ["eval", "--run", where, "--dataset", "sqwd:valid", "--out", str(scores),
                                        "--no-report"], env={"KIFQA_DATA_DIR": str(data_dir)})
        assert done.exit_code == 0, done.output
        metrics.append(json.loads((scores / "metrics.json").read_text()))
    assert metrics[0]["questions"] == 6 and metrics[0]["all"] == metrics[1]["all"]


def test_two_attempts_of_a_shard_never_mix_and_the_loser_is_removed(s3: S3Server) -> None:
    folder = RunFolder(s3.uri("runs/twice"))
    folder.create()

    def tables(answer: str) -> tuple[pa.Table, pa.Table]:
        answers = pa.Table.from_pylist([{"question_id": "q1", "answer": answer}], schema=ANSWER_SCHEMA)
        return answers, pa.Table.from_pylist([{"question_id": "q1", "n_answers": 1}], schema=TRACE_SCHEMA)

    first_answers, first_traces = tables("Q1")
    folder.write_shard(0, *tables("Q2"))  # an attempt that commits first...
    folder.write_shard(0, first_answers, first_traces)  # ...and one that commits last: its traces win
    assert folder.read_answers(["answer"])["answer"].to_pylist() == ["Q1"] and folder.count_answers() == 1
    assert len(s3.objects("runs/twice/answers/")) == 2
    folder.remove_temporaries()
    assert len(s3.objects("runs/twice/answers/")) == 1 and folder.finished() == {0}


def test_a_cut_object_is_set_aside_and_stray_objects_are_ignored(s3: S3Server) -> None:
    folder = RunFolder(s3.uri("runs/cut"))
    folder.create()
    for index in range(2):
        folder.write_shard(index, pa.Table.from_pylist([{"question_id": f"q{index}"}], schema=ANSWER_SCHEMA),
                           pa.Table.from_pylist([{"question_id": f"q{index}"}], schema=TRACE_SCHEMA))
    traces = s3.objects("runs/cut/traces/")["runs/cut/traces/shard-00001.parquet"]
    s3.put("runs/cut/traces/shard-00001.parquet", traces[: len(traces) // 2])
    s3.put("runs/cut/traces/shard-00000 (copy).parquet", traces)
    assert folder.finished() == {0} and folder.broken().keys() == {1}
    [moved] = folder.set_aside()
    assert moved.index == 1 and moved.moved_to.startswith(s3.uri("runs/cut/set-aside/"))
    assert RunFolder(s3.uri("runs/cut")).finished() == {0} and not RunFolder(s3.uri("runs/cut")).broken()


def test_an_object_with_bytes_overwritten_is_set_aside_with_its_answers(s3: S3Server) -> None:
    folder = RunFolder(s3.uri("runs/overwritten"))
    folder.create()
    for index in range(2):
        folder.write_shard(index, pa.Table.from_pylist([{"question_id": f"q{index}", "answer": "Q1"}] * 50,
                                                        schema=ANSWER_SCHEMA),
                           pa.Table.from_pylist([{"question_id": f"q{index}"}], schema=TRACE_SCHEMA))
    [key] = [k for k in s3.objects("runs/overwritten/answers/") if "shard-00001." in k]
    data = bytearray(s3.objects("runs/overwritten/answers/")[key])
    data[8:24] = bytes(16)  # in its pages: the footer reads as before
    s3.put(key, bytes(data))
    assert pq.read_metadata(pa.BufferReader(bytes(data))).num_rows == 50
    assert folder.finished() == {0} and "changed since it was written" in folder.broken()[1]
    [moved] = folder.set_aside()
    assert moved.index == 1 and moved.moved_to.startswith(s3.uri("runs/overwritten/set-aside/"))
    aside = s3.objects("runs/overwritten/set-aside/")
    assert sorted(k.rsplit("/", 1)[1] for k in aside) == ["answers-" + key.rsplit("/", 1)[1],
                                                          "traces-shard-00001.parquet"], "moved, not deleted"
    assert RunFolder(s3.uri("runs/overwritten")).finished() == {0}


def test_a_held_lease_stops_a_second_run_and_an_expired_or_orphaned_one_is_taken_over(
        cluster, s3: S3Server, tmp_path: Path, flags: Path) -> None:
    corpus, _ = _corpus(s3, tmp_path, "corpora/lease.jsonl", 5)
    out = s3.uri("runs/lease")
    with RunFolder(out).lock(lease_s=3.0):
        with pytest.raises(FolderInUse, match=r"s3://kifqa/runs/lease is in use by another run \(pid \d+ on "):
            run_job(_settings(tmp_path, resume=False), corpus, out, progress=False, **fakes(flags))
        time.sleep(4.0)  # renewed meanwhile: still held
        with pytest.raises(FolderInUse):
            run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    assert "runs/lease/lease.json" not in s3.objects("runs/lease/"), "the lease is given back"

    elsewhere = Holder("other", "another-host", 1, time.time(), time.time() + 600)
    s3.put("runs/lease/lease.json", elsewhere.dumps())
    with pytest.raises(FolderInUse, match="pid 1 on another-host"):
        run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    s3.put("runs/lease/lease.json", Holder("other", "another-host", 1, time.time() - 700, time.time() - 100).dumps())
    assert run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags)).ok, "an expired lease is taken"


def test_of_two_runs_taking_a_folder_at_once_exactly_one_holds_it(s3: S3Server) -> None:
    start, held, refused = threading.Barrier(2), [], []

    def take() -> None:
        start.wait()
        try:
            with RunFolder(s3.uri("runs/race")).lock():
                held.append(s3.objects("runs/race/")["runs/race/lease.json"])
                time.sleep(2.0)
        except FolderInUse as err:
            refused.append(str(err))

    runs = [threading.Thread(target=take) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert len(held) == 1 and len(refused) == 1, (held, refused)
    assert "is in use by another run" in refused[0]


@pytest.mark.slow  # a killed driver's rerun on disk and the store's lease takeover are in the default suite
def test_a_killed_driver_resumes_from_the_object_store(cluster, s3: S3Server, tmp_path: Path, flags: Path) -> None:
    corpus, _ = _corpus(s3, tmp_path, "corpora/killed.jsonl", 120)
    out = s3.uri("runs/killed")
    script = tmp_path / "driver.py"
    script.write_text(
        "import sys, ray\n"
        f"sys.path[:0] = [{str(REPO)!r}]\n"
        "import tests.integration.test_batch_job as t\n"
        f"ray.init(address={cluster!r}, log_to_driver=False)\n"
        "ray.cloudpickle.register_pickle_by_value(t)\n"
        f"t.run_job(t._settings(t.Path({str(tmp_path)!r}), max_tasks=1), {corpus!r}, {out!r},"
        f" progress=False, **t.fakes(t.Path({str(flags)!r}), llm_delay=0.1))\n")
    driver = subprocess.Popen([sys.executable, str(script)], cwd=REPO)
    try:
        deadline = time.time() + 120
        while len(RunFolder(out).finished()) < 2:
            assert driver.poll() is None and time.time() < deadline, "the job ended before it was killed"
            time.sleep(0.2)
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.wait()
    done_before = RunFolder(out).finished()
    assert 2 <= len(done_before) < 12

    summary = run_job(_settings(tmp_path), corpus, out, progress=False, **fakes(flags))
    assert summary.ok and summary.shards_skipped >= len(done_before)
    assert summary.ran == 120 - 10 * summary.shards_skipped, "finished shards are not run again"
    traces, answers = _rows(out)
    assert sorted(traces) == sorted(f"q{i}" for i in range(120)) and len(answers) == 120
