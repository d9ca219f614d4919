"""Hostile or broken peers on real local HTTP servers: a model server or a SPARQL endpoint that streams
100 MiB costs the one request a clear error, is read no further than the byte limit (the memory stays
small) and the client goes on answering; a model server's answer of the wrong content type is refused;
a huge model output is kept in the trace up to a bound, with a note of the cut; a gzip bomb (a small
compressed body that decodes to 128 MiB) is decoded no further than the limit on every path."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import tracemalloc
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import pyarrow.parquet as pq
import pytest
import ray
from kif_lib import Search

from kifqa.batch import run_job
from kifqa.bench.loopback import LoopbackServer
from kifqa.config import LLMResilience
from kifqa.errors import KBError
from kifqa.kb.http import ResponseTooLarge, bound_searches
from kifqa.kb.spec import open_kb
from kifqa.llm.base import ChatRequest, Message
from kifqa.llm.openai_compat import OpenAILLM
from kifqa.pipeline import Pipeline
from kifqa.types import TRACE_TEXT_CHARS, Question
from tests.fakes import ScriptedLLM
from tests.llm_server import echo_reply

FLOOD = 100 * 2**20
CHUNK = b"x" * 2**20


class Hostile(LoopbackServer):
    """Answers chat completions (``flood`` in a question streams 100 MiB; ``declared`` says 1 GiB will come;
    ``html`` answers an HTML page)
    and SPARQL queries (100 MiB of a never-ending result); counts the bytes its floods got out."""

    def __init__(self) -> None:
        self.flooded = 0
        self.lock = threading.Lock()
        super().__init__(self._handler(), name="hostile")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                if self.path.startswith("/w/api.php"):  # a search API
                    self._flood(b'{"search": [')
                else:  # e.g. the batch job's preflight GET /v1/models
                    self._answer(b'{"data": []}', "application/json")

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path.startswith("/sparql"):
                    self._flood(b'{"head": {"vars": ["x"]}, "results": {"bindings": [')
                    return
                body = json.loads(raw)
                question = body["messages"][-1]["content"]
                if "flood" in question:
                    self._flood(b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "')
                elif "declared" in question:  # says 1 GiB is coming
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(2**30))
                    self.end_headers()
                    self.close_connection = True
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        self.wfile.write(CHUNK)
                elif "html" in question:
                    self._answer(b"<html>sign in to the wifi</html>", "text/html")
                else:
                    self._answer(json.dumps(echo_reply(body)).encode(), "application/json")

            def _answer(self, data: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _flood(self, start: bytes) -> None:
                """100 MiB with no length given (the end of the connection ends it)."""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    self.wfile.write(start)
                    for _ in range(FLOOD // len(CHUNK)):
                        self.wfile.write(CHUNK)
                        with server.lock:
                            server.flooded += len(CHUNK)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


def ask(text: str) -> ChatRequest:
    return ChatRequest(messages=(Message("user", text),), max_tokens=8)


def test_a_model_server_streaming_100_mib_costs_one_request_and_the_client_goes_on() -> None:
    with Hostile() as server:
        llm = OpenAILLM(model="m", base_url=server.origin + "/v1", max_response_bytes=4 * 2**20,
                        resilience=None, timeout_s=30)

        async def run() -> list[Any]:
            tracemalloc.start()
            try:
                first = await llm.agenerate([ask("flood me"), ask("who wrote dracula"), ask("declared")])
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            after = await llm.agenerate([ask("where was sasha vujačić born")])
            await llm.aclose()
            return [*first, *after, peak]

        flooded, normal, declared, after, peak = asyncio.run(run())
        sent = server.flooded
    assert flooded.error and "passed llm.max_response_bytes (4,194,304 bytes); reading stopped there" in flooded.error
    assert normal.ok and normal.text == "echo: who wrote dracula"
    assert declared.error and "the answer is 1,073,741,824 bytes, over llm.max_response_bytes (4,194,304); not read" \
        in declared.error
    assert after.ok and after.text == "echo: where was sasha vujačić born", "the client goes on"
    assert peak < 32 * 2**20, f"{peak / 2**20:.0f} MiB held while a 100 MiB answer came"
    assert sent < FLOOD / 2, f"{sent / 2**20:.0f} MiB sent: reading stopped near the limit"


def test_a_model_answer_that_is_not_json_by_its_content_type_is_refused() -> None:
    with Hostile() as server:
        llm = OpenAILLM(model="m", base_url=server.origin + "/v1", timeout_s=30, resilience=LLMResilience(retries=0))
        [html] = llm.generate([ask("html")])
    assert html.error and "content type 'text/html', not JSON" in html.error


def test_a_sparql_endpoint_streaming_100_mib_fails_the_lookup_with_a_clear_error(settings) -> None:
    with Hostile() as server:
        kb = open_kb(f"sparql+wikidata:{server.origin}/sparql",
                     settings.override(kb={"max_response_bytes": 2**20, "batch_size": 1,
                                           "resilience": {"retries": 0}}))
        try:
            with pytest.raises(KBError, match=r"passed kb.max_response_bytes \(1,048,576 bytes\)"):
                asyncio.run(kb.facts("Q42", "P19", "forward"))
        finally:
            asyncio.run(kb.aclose())
        sent = server.flooded
    assert sent < FLOOD / 2, f"{sent / 2**20:.0f} MiB sent: reading stopped near the limit"


def test_a_trace_keeps_model_output_up_to_a_bound_and_says_it_was_cut(local_kb) -> None:
    text = "(columbano bordalo pinheiro | place of death | ?x)" + " junk" * 40_000
    llm = ScriptedLLM(draft=text, pick=text)
    result = asyncio.run(Pipeline(kb=local_kb, llm=llm).answer(
        Question("c", "where did columbano bordalo pinheiro die")))
    trace = result.trace
    cut = f" [cut: {len(text) - TRACE_TEXT_CHARS:,} more characters]"
    assert trace.draft_output == text[:TRACE_TEXT_CHARS] + cut
    assert trace.llm_calls and all(len(call.output) <= TRACE_TEXT_CHARS + len(cut) for call in trace.llm_calls)
    assert trace.llm_calls[0].output.endswith(cut)
    assert trace.error is None or len(trace.error) <= TRACE_TEXT_CHARS + 50
    assert len(json.dumps(trace.to_dict())) < 8 * TRACE_TEXT_CHARS, "the trace stays small"


@pytest.mark.slow
def test_in_a_ray_job_the_flooded_question_gets_an_error_and_the_llm_actor_lives(settings, built_kb, tmp_path) -> None:
    """One LLM actor answers every question one at a time: the question whose answer floods gets the
    byte limit's error, and the questions after it are answered by the same actor."""
    questions = ["flood: who wrote dracula", "where was sasha vujačić born", "what genre is the album thriller",
                 "what is the nationality of kim jong-un"]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(questions)))
    with Hostile() as server:
        job = settings.override(
            llm={"backend": "openai", "model": "echo", "base_url": server.origin + "/v1", "cache": None,
                 "max_concurrency": 1, "max_response_bytes": 4 * 2**20, "resilience": {"retries": 0}},
            batch={"shard_size": 4, "max_tasks": 1, "kb_cache": False, "llm_actor_cpus": 0, "llm_actors": 1})
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            summary = run_job(job, corpus, tmp_path / "out", progress=False)
        finally:
            ray.shutdown()
        sent = server.flooded
    traces = {t["question_id"]: t for t in pq.read_table(tmp_path / "out" / "traces").to_pylist()}
    assert summary.questions == 4 and len(traces) == 4
    assert "passed llm.max_response_bytes (4,194,304 bytes)" in (traces["q0"]["error"] or "")
    for qid in ("q1", "q2", "q3"):
        calls = json.loads(traces[qid]["trace"])["llm_calls"]
        assert calls and calls[0]["output"].startswith("echo: "), (qid, traces[qid]["error"])
    assert sent < FLOOD / 2


def test_a_search_api_streaming_100_mib_is_read_up_to_the_limit() -> None:
    """KIF's httpx searches (the Wikidata and DBpedia APIs) get a client that reads up to the byte limit."""
    with Hostile() as server:
        search = Search("wikidata-wapi", iri=f"{server.origin}/w/api.php")
        bound_searches([search], max_bytes=2**20)

        async def find() -> None:
            try:
                async for _ in search.aitem_descriptor("dracula", limit=5):
                    pass
            finally:
                await search.aclose()

        with pytest.raises(ResponseTooLarge, match=r"passed kb.max_response_bytes \(1,048,576 bytes\)"):
            asyncio.run(find())
        sent = server.flooded
    assert sent < FLOOD / 2


BOMB = 128 * 2**20


class GzipBomb(LoopbackServer):
    """Answers every request with a JSON answer of 128 MiB, gzip-compressed to about 130 KB."""

    def __init__(self) -> None:
        packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        zeros = b"0" * 2**20
        self.body = packer.compress(b'{"results": "') + \
            b"".join(packer.compress(zeros) for _ in range(BOMB // len(zeros))) + packer.flush()
        super().__init__(self._handler(), name="gzip-bomb")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        body = self.body

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                self._bomb()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._bomb()

            def _bomb(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

        return Handler


def _peak(run: Callable[[], Any]) -> tuple[Any, int]:
    """What ``run`` returns (or the exception it raised) and the peak of Python's memory while it ran."""
    tracemalloc.start()
    try:
        try:
            result = run()
        except Exception as e:
            result = e
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_gzip_bomb_from_a_sparql_endpoint_is_refused_at_the_decoded_limit(settings) -> None:
    with GzipBomb() as server:
        assert len(server.body) < 2**20, "the bomb is smaller than the limit as sent"
        kb = open_kb(f"sparql+wikidata:{server.origin}/sparql",
                     settings.override(kb={"max_response_bytes": 2**20, "batch_size": 1,
                                           "resilience": {"retries": 0}}))
        try:
            error, peak = _peak(lambda: asyncio.run(kb.facts("Q42", "P19", "forward")))
        finally:
            asyncio.run(kb.aclose())
    assert isinstance(error, KBError) and "passed kb.max_response_bytes (1,048,576 bytes)" in str(error), error
    assert peak < BOMB / 16, f"{peak / 2**20:.0f} MiB held while a 128 MiB answer was refused"


@pytest.mark.parametrize(("spec", "api", "sparql"), [("wikidata", "www.wikidata.org", "query.wikidata.org"),
                                                     ("dbpedia", "lookup.dbpedia.org", "dbpedia.org")])
def test_a_gzip_bomb_from_a_search_api_is_refused_at_the_decoded_limit(settings, spec, api, sparql) -> None:
    """The Wikidata API and DBpedia Lookup, as ``open_kb`` sets them up (their answers checked too)."""
    with GzipBomb() as server:
        kb = open_kb(spec, settings.override(kb={
            "max_response_bytes": 2**20, "resilience": {"retries": 0},
            "endpoints": {api: {"url": f"{server.origin}/search"}, sparql: {"url": f"{server.origin}/sparql"}}}))
        try:
            error, peak = _peak(lambda: asyncio.run(kb.search_entities("dracula")))
        finally:
            asyncio.run(kb.aclose())
    assert isinstance(error, Exception) and "passed kb.max_response_bytes (1,048,576 bytes)" in str(error), error
    assert peak < BOMB / 16, f"{peak / 2**20:.0f} MiB held while a 128 MiB answer was refused"


def test_a_gzip_bomb_from_a_model_server_costs_one_request_at_the_decoded_limit() -> None:
    with GzipBomb() as server:
        llm = OpenAILLM(model="m", base_url=server.origin + "/v1", max_response_bytes=2**20, resilience=None,
                        timeout_s=30)

        async def run() -> list[Any]:
            try:
                return await llm.agenerate([ask("who wrote dracula")])
            finally:
                await llm.aclose()

        [bombed], peak = _peak(lambda: asyncio.run(run()))
    assert bombed.error and "passed llm.max_response_bytes (1,048,576 bytes); reading stopped there" in bombed.error
    assert peak < BOMB / 16, f"{peak / 2**20:.0f} MiB held while a 128 MiB answer was refused"
