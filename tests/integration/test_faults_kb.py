"""The knowledge base behind a fault-injecting proxy in front of the real Oxigraph server: every fault
is retried or reported, a cut result is never taken as complete, a dead endpoint trips the circuit."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import httpx
import pytest

from kifqa.config import Settings
from kifqa.errors import KBError
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.spec import open_kb
from tests.fault_proxy import FaultProxy, Faults

#: (entity, property, direction) of real statements; Q183 (Germany) is the value of many.
CALLS = [("Q1000094", "P495", "forward"), ("Q1000791", "P413", "forward"), ("Q1001073", "P21", "forward"),
         ("Q183", "P495", "backward")]


def _kb(settings: Settings, url: str, *, resilience: dict[str, object], **kb: object) -> KifKnowledgeBase:
    tuned = settings.override(kb={"timeout_s": 2.0, **kb, "resilience": {
        "backoff_s": 0.01, "max_backoff_s": 0.05} | resilience})
    return open_kb(f"sparql+wikidata:{url}", tuned)


Proxied = Callable[..., tuple[FaultProxy, KifKnowledgeBase]]


@pytest.fixture
def proxied(settings: Settings, oxigraph_server: str) -> Iterator[Proxied]:
    """Makes (proxy, knowledge base through it) pairs; both are closed after the test."""
    with ExitStack() as stack:

        def make(faults: Faults, *, seed: int = 0, **kb: object) -> tuple[FaultProxy, KifKnowledgeBase]:
            proxy = stack.enter_context(FaultProxy(oxigraph_server, faults, seed=seed))
            opened = _kb(settings, proxy.url, **kb)
            stack.callback(lambda: asyncio.run(opened.aclose()))
            return proxy, opened

        yield make


async def _answers(kb: KifKnowledgeBase) -> list:
    facts = await asyncio.gather(*(kb.facts(e, p, d) for e, p, d in CALLS))
    uses = await asyncio.gather(*(kb.properties_of(e) for e, _, _ in CALLS))
    return [f.facts for f in facts] + uses


@pytest.mark.parametrize("kind", ["throttle", "unavailable", "reset", "hang", "bad_body", "cut_body", "max_rows"])
def test_each_fault_at_a_high_rate_still_gives_the_exact_answers(kind, proxied, server_kb) -> None:
    rate = 0.25 if kind in ("hang", "throttle") else 0.5  # these two cost a timeout or a Retry-After each
    proxy, kb = proxied(Faults(**{kind: rate}, hang_s=5.0), seed=7, resilience={"retries": 10}, truncated_retries=10,
                        max_concurrency=3, timeout_s=1.0)
    got = asyncio.run(_answers(kb))
    assert got == asyncio.run(_answers(server_kb))
    assert proxy.counts[kind] > 0, "the fault was injected"
    assert proxy.max_in_flight <= 3
    assert not proxy.retry_after_violations()


@pytest.mark.parametrize(("kind", "message"), [
    ("max_rows", r"filter failed after 3 attempts: truncated result .* cut it at \d+ rows \(X-SPARQL-MaxRows\)"),
    ("cut_body", r"filter failed after 4 attempts: malformed result .*: not JSON"),
    ("bad_body", r"filter failed after 4 attempts: malformed result .*: not JSON .*<html>"),
    ("unavailable", r"filter failed after 4 attempts: HTTP 503 from http://127.0.0.1:\d+/query"),
    ("reset", r"filter failed after 4 attempts: (ReadError|RemoteProtocolError|ConnectError)"),
])
def test_a_fault_that_persists_is_reported_never_taken_as_a_result(kind, message, proxied) -> None:
    proxy, kb = proxied(Faults(**{kind: 1.0}), resilience={"retries": 3}, truncated_retries=2)
    with pytest.raises(KBError, match=message):
        asyncio.run(kb.facts("Q183", "P495", "backward"))
    assert proxy.counts[kind] == (3 if kind == "max_rows" else 4)


def test_a_dead_endpoint_trips_the_circuit_then_a_probe_closes_it(proxied) -> None:
    proxy, kb = proxied(Faults(), max_concurrency=2, resilience={
        "retries": 3, "breaker_failures": 5, "breaker_cooldown_s": 1.0})
    proxy.down = True

    async def many() -> list[BaseException | object]:
        return await asyncio.gather(*(kb.facts(e, p, d) for e, p, d in CALLS * 10), return_exceptions=True)

    start = time.monotonic()
    errors = asyncio.run(many())
    assert time.monotonic() - start < 5, "40 calls end in bounded time"
    assert all(isinstance(e, KBError) for e in errors)
    # Two calls are in flight: the one that fails after the circuit opened counts too.
    assert any(re.search(r"circuit open after [56] consecutive failures", str(e)) for e in errors)
    assert proxy.counts["reset"] <= 6, "the endpoint is not hammered once the circuit is open"
    assert "last error: ReadError" in str(errors[-1]) or "last error: RemoteProtocolError" in str(errors[-1])

    proxy.down = False
    time.sleep(1.0)
    assert asyncio.run(kb.facts(*CALLS[0])).facts, "the half-open probe gets through and closes the circuit"
    assert asyncio.run(_answers(kb))


def test_retry_after_holds_every_call_and_concurrency_stays_capped(proxied) -> None:
    # One query per lookup (kb.batch_size 1): coalesced, the 25 lookups would be a handful of queries.
    proxy, kb = proxied(Faults(throttle=0.2), seed=3, resilience={"retries": 10}, max_concurrency=2, batch_size=1)

    async def many() -> None:
        await asyncio.gather(*(kb.facts(e, p, d) for e, p, d in CALLS * 5))

    asyncio.run(many())
    assert proxy.counts["throttle"] >= 2
    assert not proxy.retry_after_violations()
    assert proxy.max_in_flight <= 2


def test_the_proxy_catches_a_client_that_ignores_retry_after(oxigraph_server) -> None:
    """The Retry-After check above is not vacuous: a client that retries too early is caught."""
    with FaultProxy(oxigraph_server, Faults(throttle=1.0, retry_after_s=2)) as proxy:
        for _ in range(2):
            assert httpx.post(proxy.url, content="ASK {}").status_code == 429
            time.sleep(0.4)
    assert len(proxy.retry_after_violations()) == 1
