"""The retry policy, ``Retry-After`` holds and circuit breaker shared by the KB and the openai backend."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kifqa.batch.driver import down_line
from kifqa.resilience import Endpoint, Failure, GaveUp, RetryPolicy, open_circuits


class Boom(Exception):
    def __init__(self, failure: Failure | None) -> None:
        super().__init__(failure.message if failure else "fatal")
        self.failure = failure


def classify(err: BaseException) -> Failure | None:
    return err.failure if isinstance(err, Boom) else None


def endpoint(**policy: Any) -> Endpoint:
    return Endpoint("test", RetryPolicy(**{"backoff_s": 0.0, "timeout_s": 5.0} | policy))


def script(*outcomes: Failure | None | str):
    """An attempt that plays ``outcomes`` in turn: a Failure raises it, ``"fatal"`` raises an
    unclassified error, anything else is returned."""
    queue = list(outcomes)
    calls = []

    async def attempt():
        calls.append(time.monotonic())
        outcome = queue.pop(0) if queue else "ok"
        if isinstance(outcome, Failure):
            raise Boom(outcome)
        if outcome == "fatal":
            raise Boom(None)
        return outcome

    return attempt, calls


DOWN = Failure("unavailable", "HTTP 503")
CUT = Failure("truncated", "cut at 10 rows")


def test_kinds_have_their_own_retry_budgets() -> None:
    ep = endpoint(retries=2, truncated_retries=1)
    attempt, calls = script(DOWN, CUT, DOWN, "done")
    assert asyncio.run(ep.run(attempt, classify)) == "done" and len(calls) == 4
    attempt, calls = script(CUT, CUT, "never")
    with pytest.raises(GaveUp, match="cut at 10 rows") as info:
        asyncio.run(ep.run(attempt, classify))
    assert info.value.attempts == 2 and info.value.failure.kind == "truncated"


def test_unclassified_errors_are_raised_at_once() -> None:
    attempt, calls = script("fatal")
    with pytest.raises(Boom):
        asyncio.run(endpoint().run(attempt, classify))
    assert len(calls) == 1


def test_retry_after_holds_every_call_of_the_endpoint() -> None:
    ep = endpoint(retries=1)
    throttled, calls = script(Failure("throttled", "HTTP 429", retry_after=0.5))
    other, other_calls = script()

    async def main() -> None:
        first = asyncio.create_task(ep.run(throttled, classify))
        await asyncio.sleep(0.05)
        await ep.run(other, classify)  # started after the 429: waits for the hold too
        await first

    start = time.monotonic()
    asyncio.run(main())
    assert calls[1] - calls[0] >= 0.49 and other_calls[0] - start >= 0.49


def test_the_circuit_opens_fails_fast_then_a_probe_closes_it() -> None:
    ep = endpoint(retries=10, breaker_failures=3, breaker_cooldown_s=0.3)
    attempt, calls = script(DOWN, DOWN, DOWN, "never sent")
    with pytest.raises(GaveUp, match="circuit open after 3 consecutive failures.*last error: HTTP 503") as info:
        asyncio.run(ep.run(attempt, classify))
    assert len(calls) == 3 and info.value.attempts == 3
    start = time.monotonic()
    with pytest.raises(GaveUp, match="circuit open"):
        asyncio.run(ep.run(script()[0], classify))
    assert time.monotonic() - start < 0.05, "fails fast, sends nothing"
    time.sleep(0.3)
    probe, probe_calls = script(DOWN)  # the probe fails: open again at once
    with pytest.raises(GaveUp, match="circuit open"):
        asyncio.run(ep.run(probe, classify))
    assert len(probe_calls) == 1
    time.sleep(0.3)
    assert asyncio.run(ep.run(script("back")[0], classify)) == "back"
    assert asyncio.run(ep.run(script("still")[0], classify)) == "still"


def test_throttling_and_truncation_do_not_open_the_circuit() -> None:
    ep = endpoint(retries=10, truncated_retries=10, breaker_failures=2)
    attempt, calls = script(CUT, Failure("throttled", "429"), CUT, Failure("throttled", "429"), "ok")
    assert asyncio.run(ep.run(attempt, classify)) == "ok" and len(calls) == 5


def test_a_cancelled_probe_does_not_keep_the_circuit_shut() -> None:
    ep = endpoint(retries=0, breaker_failures=1, breaker_cooldown_s=0.1)
    with pytest.raises(GaveUp):
        asyncio.run(ep.run(script(DOWN)[0], classify))
    time.sleep(0.1)

    async def hang() -> None:
        await asyncio.sleep(10)

    async def cancelled_probe() -> None:
        task = asyncio.create_task(ep.run(hang, classify))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_probe())
    assert asyncio.run(ep.run(script("ok")[0], classify)) == "ok"


def test_each_attempt_is_bounded_by_the_timeout() -> None:
    async def hang() -> None:
        await asyncio.sleep(10)

    def timeouts(err: BaseException) -> Failure | None:
        return Failure("timeout", "timed out") if isinstance(err, TimeoutError) else None

    start = time.monotonic()
    with pytest.raises(GaveUp, match="timed out") as info:
        asyncio.run(endpoint(retries=1, timeout_s=0.1).run(hang, timeouts))
    assert info.value.attempts == 2 and time.monotonic() - start < 1.0


def outage(seconds: float):
    """An attempt that fails while the endpoint is down (``seconds`` from the first call), then answers."""
    start: list[float] = []

    async def attempt():
        start.append(start[0] if start else time.monotonic())
        await asyncio.sleep(0.01)
        if time.monotonic() - start[0] < seconds:
            raise Boom(DOWN)
        return "up"

    return attempt


def test_calls_wait_out_an_outage_shorter_than_max_outage() -> None:
    """Batch semantics: 40 calls during a 1-s outage all succeed; without waiting most fail at once."""
    async def calls(max_outage_s: float) -> list[object]:
        ep = endpoint(retries=2, breaker_failures=3, breaker_cooldown_s=0.2, max_backoff_s=0.1,
                      max_outage_s=max_outage_s)
        attempt = outage(1.0)

        async def one() -> object:
            try:
                return await ep.run(attempt, classify)
            except GaveUp as err:
                return err
        return await asyncio.gather(*(one() for _ in range(40)))

    assert asyncio.run(calls(3.0)) == ["up"] * 40
    failed = [r for r in asyncio.run(calls(0.0)) if isinstance(r, GaveUp)]
    assert len(failed) > 30 and any("circuit open" in str(r) for r in failed)


def test_a_lone_call_at_an_outage_start_waits_for_the_circuit_instead_of_using_up_its_retries() -> None:
    """Batch semantics: the first call of an outage fails more often than its retries allow before the
    circuit opens (5 failures); it waits on, since the endpoint has answered nothing since. Without
    batch semantics, or once the endpoint answers other calls, its retries count as usual."""
    def lone(max_outage_s: float) -> object:
        ep = endpoint(retries=2, breaker_failures=5, breaker_cooldown_s=0.1, max_outage_s=max_outage_s)
        try:
            return asyncio.run(ep.run(outage(0.5), classify))
        except GaveUp as err:
            return err

    assert lone(5.0) == "up"
    assert isinstance(gave_up := lone(0.0), GaveUp) and gave_up.attempts == 3

    async def poisoned() -> object:
        ep = endpoint(retries=2, breaker_failures=5, max_outage_s=5.0)
        tries = []

        async def poison() -> str:  # another call is answered before each of its failures
            tries.append(await ep.run(script("fine")[0], classify))
            raise Boom(DOWN)

        try:
            return await ep.run(poison, classify)
        except GaveUp as err:
            return err

    assert isinstance(result := asyncio.run(poisoned()), GaveUp) and result.attempts == 3


def test_an_outage_longer_than_max_outage_fails_every_call_saying_so() -> None:
    async def calls() -> tuple[list[object], float]:
        ep = endpoint(retries=2, breaker_failures=3, breaker_cooldown_s=0.2, max_backoff_s=0.1, max_outage_s=0.5)
        attempt = outage(3600)
        start = time.monotonic()
        results = await asyncio.gather(*(ep.run(attempt, classify) for _ in range(20)), return_exceptions=True)
        late = await asyncio.gather(*(ep.run(attempt, classify) for _ in range(20)), return_exceptions=True)
        return results + late, time.monotonic() - start

    results, seconds = asyncio.run(calls())
    assert all(isinstance(r, GaveUp) for r in results) and seconds < 3
    assert all("longer than the 0.5 s an outage may last" in str(r) for r in results[-20:])


def test_an_open_circuit_is_listed_by_label_with_how_long_it_has_been_down() -> None:
    ep = Endpoint("test", RetryPolicy(retries=0, backoff_s=0.0, breaker_failures=2, breaker_cooldown_s=0.2),
                  label="http://kb.example.org/sparql (store)")
    attempt, _ = script(DOWN, DOWN, "ok")
    for _ in range(2):
        with pytest.raises(GaveUp):
            asyncio.run(ep.run(attempt, classify))
    assert ep.label in open_circuits()  # the second failure opened it
    time.sleep(0.3)
    assert 0.3 <= open_circuits()[ep.label] < 60
    assert down_line({ep.label: 42.4, "http://127.0.0.1:8080/v1": 3.0}) == (
        "http://127.0.0.1:8080/v1 down for 3 s; http://kb.example.org/sparql (store) down for 42 s")
    assert asyncio.run(ep.run(attempt, classify)) == "ok"  # the probe after the cooldown closes it
    assert ep.label not in open_circuits() and ep.down_s() is None and down_line({}) == ""
