"""Before a job's first shard: the model server and the KB endpoint it will use must be there.

An address where nothing can be reached (the connection is refused, the host is unknown or
unreachable, no connection within :data:`CHECK_TIMEOUT_S`) is a wrong address or a server not
started: a configuration error that fails the job in seconds with its URL. A server that takes the
connection and then fails (resets it, answers 5xx, hangs) is an outage the job waits out
(``batch.max_outage_s``), like one that answered before and then fails (docs/reliability.md).
"""

from __future__ import annotations

import httpx

from kifqa.config import Settings
from kifqa.errors import ConfigError
from kifqa.kb.spec import endpoint_url, user_agent
from kifqa.resilience import connection_failure

#: Seconds an endpoint has to answer the check (connecting included).
CHECK_TIMEOUT_S = 10.0


def check_endpoints(settings: Settings, *, kb: bool = True, llm: bool = True) -> None:
    """Raises :class:`ConfigError` naming the first endpoint that cannot be reached: with ``llm``, the
    model server of the ``openai`` backend (``GET {llm.base_url}/models``); with ``kb``, the SPARQL
    endpoint of ``kb.spec`` (an ``ASK {}`` query). Any answer passes, an error status too, and so does
    any failure after connecting: the server is there (an outage is not this check's business)."""
    checks: list[tuple[str, str, dict[str, str]]] = []
    if llm and settings.llm.backend == "openai" and settings.llm.base_url:
        base = settings.llm.base_url.rstrip("/")
        checks.append((f"the model server {base} (llm.base_url)", f"{base}/models", {}))
    if kb and (url := endpoint_url(settings.kb.spec, settings)):
        checks.append((f"the KB endpoint {url} (kb.spec {settings.kb.spec})", url, {"query": "ASK {}"}))
    with httpx.Client(timeout=CHECK_TIMEOUT_S, headers={"User-Agent": user_agent(settings)}) as client:
        for what, url, params in checks:
            try:
                client.get(url, params=params)
            except (httpx.ConnectError, httpx.ConnectTimeout) as err:
                raise ConfigError(f"{what} cannot be reached: {_why(err)}") from None
            except httpx.HTTPError:
                pass


def _why(err: httpx.HTTPError) -> str:
    """What went wrong, in a few words: ``connection refused``, ``no connection in 10 s``, ..."""
    if isinstance(err, httpx.ConnectTimeout):
        return f"no connection in {CHECK_TIMEOUT_S:g} s"
    return connection_failure(err)
