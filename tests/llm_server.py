"""A real HTTP server speaking OpenAI's chat-completions API, with injectable faults (tests only).

``ChatServer`` listens on 127.0.0.1 on a free port in a background thread (stdlib
``ThreadingHTTPServer``). Each POST to ``/v1/chat/completions`` first takes the next queued
:class:`Fault`, if any (an error status with headers, a delay, a raw body, a dropped connection);
otherwise it answers with ``reply(body)``. Every request body and its headers are kept, and the
peak number of requests in flight is tracked (a request stops counting just before its answer is
written: its client may send the next one as soon as it has read it), so tests can check what
clients sent and how hard they pushed.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from kifqa.bench.loopback import LoopbackServer


@dataclass(frozen=True)
class Fault:
    """What the server does instead of answering normally (one request)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    #: Raw response body; ``None`` sends an OpenAI-style error object for ``status``.
    body: str | None = None
    #: Seconds to wait before answering (longer than the client's timeout: a hang).
    delay_s: float = 0.0
    #: Close the connection without any response.
    drop: bool = False


def echo_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A chat completion answering ``echo: <last message>`` with word counts as token counts."""
    last = body["messages"][-1]["content"]
    prompt_words = sum(len(m["content"].split()) for m in body["messages"])
    text = f"echo: {last}"
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_words,
            "completion_tokens": len(text.split()),
            "total_tokens": prompt_words + len(text.split()),
            "prompt_tokens_details": {"cached_tokens": 3},
        },
    }


class ChatServer(LoopbackServer):
    """An OpenAI-compatible chat server for tests; use as a context manager."""

    def __init__(self, reply: Callable[[dict[str, Any]], dict[str, Any]] = echo_reply, *, delay_s: float = 0.0) -> None:
        """``reply`` builds the normal answer; ``delay_s`` delays every normal answer."""
        self.reply = reply
        self.delay_s = delay_s
        self.faults: deque[Fault] = deque()
        #: Faults served to every request once the queue is empty (``None``: answer normally).
        self.persistent: Fault | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        super().__init__(self._handler(), name="chat-server")

    @property
    def url(self) -> str:
        """The API root, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"{self.origin}/v1"

    def fail(self, *faults: Fault) -> None:
        """Queues ``faults`` for the next requests, in order."""
        self.faults.extend(faults)

    def _next_fault(self) -> Fault | None:
        """The fault for the next request, if any."""
        with self._lock:
            return self.faults.popleft() if self.faults else self.persistent

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, bound to this server."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            """Serves ``POST /v1/chat/completions``."""
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                """Records the request, then answers it or plays the next fault."""
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with server.in_flight_request() as self.answered:
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        self._send(404, {"error": {"message": f"no route {self.path}", "code": 404}})
                        return
                    body = json.loads(raw)
                    with server._lock:
                        server.requests.append(body)
                        server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    fault = server._next_fault()
                    if fault is None:
                        time.sleep(server.delay_s)
                        self._send(200, server.reply(body))
                        return
                    time.sleep(fault.delay_s)
                    if fault.drop:
                        self.answered()
                        self.close_connection = True
                        self.connection.close()
                        return
                    payload = fault.body if fault.body is not None else {
                        "error": {"message": f"injected {fault.status}", "type": "server_error", "code": fault.status}
                    }
                    self._send(fault.status, payload, fault.headers)

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                """Writes one JSON (or raw) response and closes the connection."""
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self.answered()  # the client may send its next request once it has read this answer
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("Connection", "close")
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)
                self.close_connection = True

        return Handler
