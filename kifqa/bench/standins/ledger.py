"""What a throttling service holds against each client: the ``Retry-After`` waits it handed out, and the
requests that arrived inside one."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class _Waits:
    #: (when the wait was delivered, when it ends)
    windows: list[tuple[float, float]] = field(default_factory=list)


class Ledger:
    """Per-client ``Retry-After`` windows; thread-safe.

    Args:
        grace_s: A request arriving this soon after its client was told to wait was sent before the client
            could read the answer: it does not count.
    """

    def __init__(self, *, grace_s: float = 0.25) -> None:
        self.grace_s = grace_s
        #: Requests that arrived while a wait their client had been told of still ran.
        self.inside_waits = 0
        self._clients: dict[str, _Waits] = {}
        self._lock = threading.Lock()

    def arrived(self, client: str, now: float | None = None) -> bool:
        """Notes a request of ``client``; whether it arrived inside a wait it had been told of."""
        now = time.monotonic() if now is None else now
        with self._lock:
            waits = self._clients.setdefault(client, _Waits())
            waits.windows = [(at, end) for at, end in waits.windows if end > now]
            inside = any(at + self.grace_s < now for at, _ in waits.windows)
            self.inside_waits += inside
            return inside

    def told_to_wait(self, client: str, seconds: float) -> None:
        """``client`` was just answered ``Retry-After: seconds``."""
        now = time.monotonic()
        with self._lock:
            self._clients.setdefault(client, _Waits()).windows.append((now, now + seconds))

    def reset(self) -> int:
        """The count of requests inside waits so far; counting starts again from zero (the waits are kept)."""
        with self._lock:
            counted, self.inside_waits = self.inside_waits, 0
            return counted


@dataclass
class _Client:
    tokens: float
    updated: float
    in_flight: int = 0


class ClientRate:
    """A service's per-client limit: ``max_concurrent`` requests in flight and ``per_second`` (bursts of one
    second's worth); what goes beyond is told to wait ``retry_after_s`` (HTTP 429). Thread-safe."""

    def __init__(self, *, max_concurrent: int, per_second: float, ledger: Ledger, retry_after_s: float = 1.0) -> None:
        self.max_concurrent, self.per_second, self.retry_after_s = max_concurrent, per_second, retry_after_s
        self.ledger = ledger
        #: Most requests of one client in flight at once.
        self.max_in_flight = 0
        self._clients: dict[str, _Client] = {}
        self._lock = threading.Lock()

    def admit(self, client: str, now: float) -> float | None:
        """Starts a request of ``client`` (``None``), or the ``Retry-After`` of its 429 (noted in the ledger)."""
        with self._lock:
            c = self._clients.setdefault(client, _Client(tokens=self.per_second, updated=now))
            c.tokens = min(self.per_second, c.tokens + (now - c.updated) * self.per_second)
            c.updated = now
            if c.in_flight >= self.max_concurrent or c.tokens < 1.0:
                self.ledger.told_to_wait(client, self.retry_after_s)
                return self.retry_after_s
            c.tokens -= 1.0
            c.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, c.in_flight)
            return None

    def done(self, client: str) -> None:
        """A request :meth:`admit` started is answered (call it before the answer leaves: the client may send
        its next request as soon as it has read it)."""
        with self._lock:
            self._clients[client].in_flight -= 1
