"""A stand-in for the Hugging Face Hub's file endpoint on 127.0.0.1 (tests only): ``HEAD
/{repo}/resolve/main/config.json`` of a gated repository answers 401 without a token, 403 with one
that may not read it and 200 with :data:`GOOD_TOKEN`, as the Hub does; any other repository is 404."""

from __future__ import annotations

from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any

from kifqa.bench.loopback import LoopbackServer

GOOD_TOKEN = "hf_good"


class FakeHub(LoopbackServer):
    """Serves the gated ``repos``; use as a context manager (``origin`` is its ``HF_ENDPOINT``)."""

    def __init__(self, repos: Iterable[str]) -> None:
        paths = {f"/{repo}/resolve/main/config.json" for repo in repos}

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_HEAD(self) -> None:
                auth = self.headers.get("Authorization")
                if self.path not in paths:
                    status = 404
                else:
                    status = 401 if auth is None else 200 if auth == f"Bearer {GOOD_TOKEN}" else 403
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        super().__init__(Handler, name="fake-hub")
