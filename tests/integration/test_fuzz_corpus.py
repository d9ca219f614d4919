"""Bad input never crashes a job: corpora fuzzed with hypothesis (random unicode, control characters,
huge strings, blank lines, wrong types, duplicate ids, broken JSON) go through the real batch job —
the real pipeline on the local KB, with a model double that drafts from the question's own text — and
every row gets exactly one trace."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator

import pytest
import ray
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import tests.fakes
from kifqa.batch import actor_pools, run_job
from kifqa.config import Settings
from kifqa.runs import RunFolder
from tests.fakes import ScriptedLLM

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ray.cloudpickle.register_pickle_by_value(tests.fakes)

#: Text of every kind: any code point but lone surrogates, including control characters.
ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
#: What JSON may hold: lone surrogates too (``json.dumps`` escapes them).
JSON_TEXT = st.one_of(st.text(max_size=60), st.text(st.characters(), max_size=60))
QUESTION = st.one_of(
    JSON_TEXT,
    st.sampled_from(["where was james brown born", "who wrote the book", "", "   ", "\x00\x01\x02", "?" * 30]),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "é", "\U0001F600", " ", "(|)"]), st.integers(900, 20_000)),
    st.integers(), st.floats(allow_nan=True), st.booleans(), st.none(), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
ID = st.one_of(st.sampled_from(["q1", "q2", "q3"]), st.text(max_size=10), st.integers(-5, 10**30), st.floats(),
               st.none(), st.booleans(), st.lists(st.integers(), max_size=2))
ROW = st.one_of(
    st.fixed_dictionaries({"id": ID, "question": QUESTION}).map(json.dumps),
    st.fixed_dictionaries({"question": QUESTION}).map(json.dumps),
    st.fixed_dictionaries({"id": ID}).map(json.dumps),
    st.one_of(st.integers(), st.lists(st.integers(), max_size=2), st.text(max_size=10), st.none()).map(json.dumps),
    ANY_TEXT.filter(lambda s: s.strip() and "\n" not in s and "\r" not in s),  # not JSON at all
)
#: A corpus: rows and blank lines (blank lines are not rows).
LINES = st.lists(st.one_of(ROW, ROW, ROW, st.sampled_from(["", "   ", "\t"])), min_size=1, max_size=25)


def drafting(settings: Settings) -> ScriptedLLM:
    """Drafts ``(<the question's first 30 characters> | born in | ?x)``, whatever they are, and picks
    option 1 when asked to choose: the pipeline parses and searches hostile text for real."""
    return ScriptedLLM(draft="({q} | born in | ?x)", identity="drafting-double")


@pytest.fixture(scope="module")
def pools(settings: Settings, built_kb) -> Iterator[tuple[Settings, object]]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    job = settings.model_copy(update={"batch": settings.batch.model_copy(update={
        "shard_size": 10, "kb_cache": False, "question_timeout_s": 60})})
    with actor_pools(job, open_llm=drafting) as running:
        yield job, running
    ray.shutdown()


@given(lines=LINES)
@example(lines=["", "   "])  # no row at all: no shard, no trace
@example(lines=[json.dumps({"id": "s\ud800", "question": "who is \udc00 born"}),  # lone surrogates
                json.dumps({"id": "c", "question": "\x00\x1b[2J where was \x7f born"}), "",
                json.dumps({"id": "c", "question": "duplicate"}), json.dumps({"id": 2.5, "question": "float id"}),
                json.dumps({"id": "big", "question": "x " * 60_000}), "\x00 not json", json.dumps([1, 2]),
                json.dumps({"id": "n", "question": None}), json.dumps({"id": "l", "question": ["a"]})])
@hsettings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
def test_a_fuzzed_corpus_gives_one_trace_per_row(lines: list[str], pools, tmp_path_factory) -> None:
    job, running = pools
    tmp = tmp_path_factory.mktemp("fuzz")
    corpus = tmp / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = sum(bool(line.strip()) for line in lines)

    summary = run_job(job, corpus, tmp / "out", pools=running, progress=False)

    out = RunFolder(tmp / "out")
    traces = out.read_traces().to_pylist()
    assert summary.ok and summary.questions == rows == len(traces)
    assert len({t["question_id"] for t in traces}) == rows, "every row keeps a unique id"
    answers = Counter(out.read_answers(["question_id"])["question_id"].to_pylist())
    for t in traces:
        assert json.loads(t["trace"])["question_id"] == t["question_id"]
        assert answers[t["question_id"]] == t["n_answers"], "the answer rows are the trace's answers"
        assert bool(t["error"]) == bool(t["error_step"]), "an error names its step, and only an error does"
        if t["error"]:
            assert t["n_answers"] == 0
        if t["error_step"] != "input":
            assert t["question"].strip() and len(t["question"]) <= job.pipeline.max_question_chars, \
                "empty and overlong questions are refused as input errors"
