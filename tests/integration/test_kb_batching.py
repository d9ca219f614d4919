"""KB lookups of many callers coalesced into batch queries, on the real Oxigraph server behind the
WDQS-like endpoint (which counts the queries) or the fault proxy: fewer queries than lookups and the
same results as one query per lookup; a rejected lookup fails only its caller; a batch cut at a row
limit is split and still complete; exact names asked of a store without a label index; in a Ray job,
the shared limit and Retry-After hold per HTTP request."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import ray
from kif_lib import Item

from kifqa.batch import run_job
from kifqa.bench.wdqs_like import WDQSLike
from kifqa.config import EndpointLimit, Settings
from kifqa.errors import KBError
from kifqa.eval.datasets import load_sqwd
from kifqa.examples.text import spans
from kifqa.kb import sparql
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.spec import open_kb
from tests.fault_proxy import FaultProxy

#: (entity, property, direction) lookups of real statements (kb_triples.tsv) and the entities' neighbours.
TRIPLES = 60


@pytest.fixture(scope="module")
def lookups(data_dir: Path) -> list[tuple[str, str, str]]:
    rows = (data_dir / "simplequestions-wikidata" / "kb_triples.tsv").read_text().splitlines()[::400][:TRIPLES]
    triples = [tuple(r.split("\t")) for r in rows]
    return [(s, p, "forward") for s, p, _ in triples] + [(o, p, "backward") for _, p, o in triples]


def kb_at(url: str, settings: Settings, **kb: Any) -> KifKnowledgeBase:
    return open_kb(f"sparql+wikidata:{url}", settings.override(kb=kb))


async def answer_all(kb: KifKnowledgeBase, lookups: list[tuple[str, str, str]]) -> tuple[list[Any], list[Any]]:
    """Every lookup's properties_of and facts, all at once (as many questions in flight would ask them)."""
    entities = list(dict.fromkeys(e for e, _, _ in lookups))
    properties = await asyncio.gather(*(kb.properties_of(e) for e in entities), return_exceptions=True)
    facts = await asyncio.gather(*(kb.facts(e, p, d) for e, p, d in lookups), return_exceptions=True)
    return properties, facts


def comparable(facts: list[Any]) -> list[Any]:
    return [f if isinstance(f, BaseException) else (f.facts, f.truncated, f.filter) for f in facts]


def test_lookups_of_many_callers_share_queries_and_give_the_same_results(settings, oxigraph_server, lookups):
    results = {}
    for size in (1, 64):
        with WDQSLike(oxigraph_server, latency_s=0.0, charge_s=0.0, max_concurrent=16) as endpoint:
            kb = kb_at(endpoint.url, settings, batch_size=size)
            try:
                results[size] = asyncio.run(answer_all(kb, lookups))
            finally:
                asyncio.run(kb.aclose())
            counts = endpoint.counts
        n_lookups = 2 * len({e for e, _, _ in lookups}) + len(lookups)  # properties_of asks both ways
        if size == 1:
            assert counts.requests == n_lookups, "one query per lookup"
        else:
            assert counts.requests < n_lookups / 5, f"{counts.requests} queries for {n_lookups} lookups"
            assert kb.batching[0] == counts.requests and kb.batching[1] == n_lookups
    (props_1, facts_1), (props_64, facts_64) = results[1], results[64]
    assert props_1 == props_64 and comparable(facts_1) == comparable(facts_64)
    assert all(f.facts for f in facts_64), "each lookup is of a real statement"
    assert not any(f.batch for f in facts_1)
    assert sum(f.batch.startswith("batch ") for f in facts_64) > len(facts_64) / 2, "the trace names the batch"


def test_a_rejected_lookup_fails_only_its_own_caller(settings, oxigraph_server, lookups):
    bad = lookups[7]
    with FaultProxy(oxigraph_server) as proxy:
        proxy.poison = f"<http://www.wikidata.org/entity/{bad[0]}>"
        kb = kb_at(proxy.url, settings, batch_size=64)
        try:
            _, facts = asyncio.run(answer_all(kb, lookups))
        finally:
            asyncio.run(kb.aclose())
    failed = [lookup for lookup, f in zip(lookups, facts) if isinstance(f, BaseException)]
    assert failed == [x for x in lookups if x[0] == bad[0]] and all(isinstance(f, KBError) for f in facts
                                                                     if isinstance(f, BaseException))
    assert proxy.counts["poison"] >= 2 and proxy.counts["ok"] < len(lookups) / 2, "batches, split around it"


def test_an_iri_sparql_cannot_carry_fails_only_its_own_lookup(settings, oxigraph_server, lookups):
    """One of 50 concurrent lookups names an IRI KIF cannot serialize: the id parser refuses it, and
    given to the batch as a KIF entity (past the parser), it fails alone while the 49 share queries."""
    good = lookups[:49]
    bad = 'http://x.org/"a"'
    with WDQSLike(oxigraph_server, latency_s=0.0, charge_s=0.0, max_concurrent=16) as endpoint:
        kb = kb_at(endpoint.url, settings, batch_size=64)

        async def ask_all() -> tuple[list[Any], list[Any]]:
            parsed = await asyncio.gather(*(kb.facts(e, p, d) for e, p, d in [*good[:25], (bad, good[0][1], "forward"),
                                                                             *good[25:]]), return_exceptions=True)
            e, p, d = good[0]
            entity = Item(bad)
            past = await asyncio.gather(*(kb.facts(x, y, z) for x, y, z in good[:25]),
                                        kb._run(kb._batched_facts(entity, kb._typed_property(p), d)),
                                        *(kb.facts(x, y, z) for x, y, z in good[25:]), return_exceptions=True)
            return parsed, past

        try:
            parsed, past = asyncio.run(ask_all())
        finally:
            asyncio.run(kb.aclose())
        requests = endpoint.counts.requests
    for results in (parsed, past):
        failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
        assert failed == [25] and isinstance(results[25], KBError), results[25]
        assert all(r.facts for i, r in enumerate(results) if i != 25)
    assert "not an entity id" in str(parsed[25]) and "no SPARQL query can carry" not in str(parsed[25])
    assert "a SPARQL query can carry" in str(past[25])
    assert requests < 20, f"{requests} queries for 98 lookups: the good ones still share batches"


def test_a_lookup_alone_costs_what_it_costs_unbatched(settings, oxigraph_server, lookups, monkeypatch):
    """A lookup with none other in flight runs the batch query alone (its rows read as batch rows): the same
    facts as without batching, no batch named, one request; rejected, the same error after as many requests."""
    entity, prop, direction = lookups[3]
    read = []
    reader_read = sparql.RowReader.read
    monkeypatch.setattr(sparql.RowReader, "read", lambda reader, result: read.append(1) or reader_read(reader, result))
    seen = {}
    for size in (1, 64):
        with FaultProxy(oxigraph_server) as proxy:
            kb = kb_at(proxy.url, settings, batch_size=size)
            try:
                found = asyncio.run(kb.facts(entity, prop, direction))
                requests = len(proxy.requests)
                proxy.poison = f"<http://www.wikidata.org/entity/{entity}>"
                with pytest.raises(KBError) as rejected:
                    asyncio.run(kb.facts(entity, prop, direction))
            finally:
                asyncio.run(kb.aclose())
            error = str(rejected.value).replace(proxy.origin, "PROXY")
            seen[size] = (found.facts, found.batch, requests, error, proxy.counts["poison"])
        assert len(read) == (0 if size == 1 else 1), "alone, the lookup's rows are read as a batch's"
    assert seen[1] == seen[64] and seen[64][0] and seen[64][1] == "" and seen[64][2] == 1


def test_a_batch_past_the_row_cut_is_split_and_complete(settings, oxigraph_server, lookups):
    """DBpedia's cut (10,000 rows) scaled to these lookups: each alone is under it, batches are not."""
    with WDQSLike(oxigraph_server, latency_s=0.0, charge_s=0.0, max_concurrent=16, max_rows=None) as endpoint:
        kb = kb_at(endpoint.url, settings, batch_size=1)
        try:
            whole = asyncio.run(answer_all(kb, lookups))
        finally:
            asyncio.run(kb.aclose())
    largest = max(max(len(f.facts) for f in whole[1]), max(len(p.uses) for p in whole[0]))
    with WDQSLike(oxigraph_server, latency_s=0.0, charge_s=0.0, max_concurrent=16, max_rows=max(largest, 20)) as endpoint:
        kb = kb_at(endpoint.url, settings, batch_size=64, truncated_retries=0)
        try:
            cut = asyncio.run(answer_all(kb, lookups))
        finally:
            asyncio.run(kb.aclose())
        assert endpoint.counts.cut > 0, "some batches passed the row cut"
    assert cut[0] == whole[0] and comparable(cut[1]) == comparable(whole[1])


def test_exact_names_are_asked_of_a_store_without_a_label_index_in_shared_queries(settings, oxigraph_server, local_kb):
    """``named`` of the grounded draft over a plain SPARQL endpoint (as WDQS): the runs of 40 real questions
    that the store holds as item labels or aliases, in a few queries; what the label index finds besides is
    a name written with other accents, punctuation or capitals. A rejected query fails only its own caller."""
    questions = [q.text for q in load_sqwd(settings.data_dir, "valid", limit=40)]

    async def ask(kb: KifKnowledgeBase) -> list[Any]:
        return await asyncio.gather(*(kb.named(spans(q)) for q in questions), return_exceptions=True)

    indexed = asyncio.run(ask(local_kb))
    with WDQSLike(oxigraph_server, latency_s=0.0, charge_s=0.0, max_concurrent=16) as endpoint:
        kb = open_kb(f"kif:wikidata-sparql?iri={endpoint.url}", settings.override(kb={"batch_size": 64}))
        try:
            assert kb.index is None
            found = asyncio.run(ask(kb))
        finally:
            asyncio.run(kb.aclose())
        requests = endpoint.counts.requests
    assert requests <= len(questions) / 4, f"{requests} queries for {len(questions)} lookups"
    assert all(set(f) <= set(i) for f, i in zip(found, indexed))
    assert sum(map(len, found)) >= 0.9 * sum(map(len, indexed)) and "sasha vujačić" in found[0]

    poisoned = next(run for run in found[5] if " " in run)
    with FaultProxy(oxigraph_server) as proxy:
        proxy.poison = f'"{poisoned}"@en'
        kb = open_kb(f"kif:wikidata-sparql?iri={proxy.url}", settings.override(kb={"batch_size": 64}))
        try:
            rejected = asyncio.run(ask(kb))
        finally:
            asyncio.run(kb.aclose())
    failed = [i for i, r in enumerate(rejected) if isinstance(r, BaseException)]
    assert failed == [i for i, q in enumerate(questions) if poisoned in spans(q)] and 5 in failed
    assert all(isinstance(rejected[i], KBError) for i in failed)
    assert [r for i, r in enumerate(rejected) if i not in failed] == [f for i, f in enumerate(found) if i not in failed]


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_retry_after_holds_every_request_of_a_job(cluster, settings, oxigraph_server, tmp_path):
    """The endpoint's query-time budget is far below what the job's limit (which knows of no budget)
    lets through, so it answers 429s: no request of any KB actor arrives inside a Retry-After (but for
    those sent within 0.25 s of it, before it could be read), and no question ends in an error."""
    questions = load_sqwd(settings.data_dir, "valid", limit=240)[200:240]
    corpus = tmp_path / "q.jsonl"
    corpus.write_text("".join(json.dumps({"id": q.id, "question": q.text}) + "\n" for q in questions))
    with WDQSLike(oxigraph_server, budget_s=6.0, burst_s=1.0, charge_s=0.05, latency_s=0.05) as endpoint:
        job = settings.override(
            kb={"spec": f"sparql+wikidata:{endpoint.url}", "batch_size": 2},
            llm={"backend": "gold", "cache": None, "cache_mode": "off"},
            batch={"kb_actors": 2, "kb_cache": False, "llm_actor_cpus": 0, "shard_size": 20, "max_tasks": 2,
                   "limits": {"127.0.0.1": EndpointLimit(max_concurrent=5, per_second=20).model_dump()}})
        summary = run_job(job, corpus, tmp_path / "out", progress=False)
        counts = endpoint.counts
    assert counts.throttled > 0, "the endpoint throttled the job"
    assert counts.inside_retry_after == 0, "no request while a Retry-After ran"
    errors = pq.read_table(tmp_path / "out" / "traces", columns=["error"]).column("error").to_pylist()
    assert summary.errors == 0 and not any(errors), "throttling only delays questions"
