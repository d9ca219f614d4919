"""Retries, Retry-After, the concurrency cap, timeouts and error wrapping of KB calls."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from kifqa import resilience
from kifqa.config import KBSettings
from kifqa.errors import KBError
from kifqa.kb.base import KBStats
from kifqa.kb.guard import Guard, classify, retry_after


def _status(code: int, headers: dict[str, str] | None = None, body: str = "") -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "https://query.example.org/sparql")
    response = httpx.Response(code, headers=headers, text=body, request=request)
    return httpx.HTTPStatusError(f"status {code}", request=request, response=response)


def _guard(*, retries: int = 3, backoff_s: float = 0.5, **settings: object) -> Guard:
    kb = KBSettings.model_validate(settings | {"resilience": {"retries": retries, "backoff_s": backoff_s}})
    return Guard("test-kb", kb, KBStats())


class Flaky:
    """Fails with the given errors, then returns ``"ok"``."""

    def __init__(self, *errors: BaseException, clock: Clock | None = None) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.clock = clock
        #: The clock's time at each call (with a clock).
        self.times: list[float] = []

    async def __call__(self) -> str:
        self.calls += 1
        if self.clock:
            self.times.append(self.clock.monotonic())
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_transient_errors_are_retried_and_counted() -> None:
    guard = _guard(retries=3, backoff_s=0.0)
    call = Flaky(_status(503, {"Retry-After": "0"}), httpx.ConnectError("refused"), _status(429, {"Retry-After": "0"}))
    assert asyncio.run(guard.run("facts", call)) == "ok"
    assert call.calls == 4
    assert guard.stats.retries == 3
    assert guard.stats.calls == 1 and guard.stats.by_kind == {"facts": 1}


class Clock:
    """A fake clock for :mod:`kifqa.resilience`: ``sleep`` advances it at once and records the wait."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds
        await _sleep(0)


_sleep = asyncio.sleep


def test_retry_after_is_honoured_and_is_all_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(resilience, "time", clock)
    monkeypatch.setattr(asyncio, "sleep", clock.sleep)
    guard = _guard(retries=1, backoff_s=5.0)  # a backoff would show as a longer wait
    call = Flaky(_status(429, {"Retry-After": "0.3"}), clock=clock)
    assert asyncio.run(guard.run("facts", call)) == "ok"
    assert call.times == [0.0, 0.3]  # the retry came exactly when the Retry-After ran out
    assert sum(clock.waits) == 0.3


def test_retry_after_forms() -> None:
    assert retry_after(_status(503, {"Retry-After": "12"})) == 12
    assert retry_after(_status(503, {"Retry-After": "100000"})) == 60  # capped
    assert retry_after(_status(503, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0  # in the past
    assert retry_after(_status(503)) is None
    assert retry_after(ValueError()) is None


def test_client_errors_are_not_retried() -> None:
    guard = _guard(retries=3)
    call = Flaky(_status(400, body="Parse error: bad query"))
    with pytest.raises(KBError, match=r"test-kb: facts failed: HTTP 400 .*Parse error: bad query"):
        asyncio.run(guard.run("facts", call))
    assert call.calls == 1 and guard.stats.retries == 0


def test_giving_up_says_how_often() -> None:
    guard = _guard(retries=2)
    call = Flaky(*[_status(502, {"Retry-After": "0"})] * 3)
    with pytest.raises(KBError, match="failed after 3 attempts: HTTP 502"):
        asyncio.run(guard.run("labels", call))


def test_timeout_becomes_kb_error() -> None:
    guard = _guard(retries=0, timeout_s=0.05)

    async def slow() -> None:
        await asyncio.sleep(5)

    with pytest.raises(KBError, match="search_entities failed: timed out"):
        asyncio.run(guard.run("search_entities", slow))


def test_unexpected_errors_become_kb_errors() -> None:
    with pytest.raises(KBError, match="OSError: disk on fire"):
        asyncio.run(_guard().run("facts", Flaky(OSError("disk on fire"))))


def test_concurrency_is_capped() -> None:
    guard = _guard(max_concurrency=3)
    running = peak = 0

    async def call() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1

    async def main() -> None:
        await asyncio.gather(*(guard.run("facts", call) for _ in range(20)))

    asyncio.run(main())
    assert peak == 3


def test_what_is_retried() -> None:
    assert classify(httpx.ReadTimeout("slow")).kind == "timeout"
    assert classify(TimeoutError()).kind == "timeout"
    assert classify(_status(500)).kind == "unavailable" and classify(_status(429)).kind == "throttled"
    assert classify(_status(404)) is None and classify(ValueError()) is None


@pytest.mark.parametrize(("err", "kind"), [
    (_status(429, {"Retry-After": "2"}), "throttled"), (_status(503), "unavailable"), (_status(408), "unavailable"),
    (_status(400), None), (_status(404), None), (httpx.ReadTimeout("slow"), "timeout"), (TimeoutError(), "timeout"),
    (httpx.ConnectError("refused"), "connection"), (httpx.RemoteProtocolError("reset"), "connection"),
    (ValueError("not http"), None),
])
def test_the_kb_and_the_model_client_sort_an_http_error_alike(err: BaseException, kind: str | None) -> None:
    """One classifier (kifqa.resilience.http_failure) serves both HTTP clients: the same error is the same
    kind of failure, with the same Retry-After, for the KB guard and the openai backend."""
    from kifqa.llm.openai_compat import OpenAILLM

    model = OpenAILLM(model="m", base_url="http://127.0.0.1:9/v1")._classify(err)
    kb = classify(err)
    assert (kb and kb.kind, model and model.kind) == (kind, kind)
    assert (kb and kb.retry_after) == (model and model.retry_after) == (2.0 if kind == "throttled" else None)
