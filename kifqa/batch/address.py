"""Which Ray cluster a job joins: the address ``ray.init`` gets, once something is seen to answer there.

Ray takes a cluster's address from ``batch.ray_address`` (``--address``), else ``RAY_ADDRESS``, else, with no
address or ``auto``, from the file the last ``ray start`` wrote (``ray_current_cluster`` in Ray's temp
folder, ``/tmp/ray`` or ``$RAY_TMPDIR/ray``). A cluster that died without ``ray stop`` leaves that file
behind, and ``ray.init`` then waits on its dead GCS for many minutes. So the address is probed first (a TCP
connection within :data:`PROBE_TIMEOUT_S`):

- no address given, and the file names a cluster that does not answer: the file is stale, and a fresh local
  cluster is started (a warning says so);
- an address given (``auto`` resolved as Ray resolves it) where nothing answers: :class:`ConfigError`
  saying what to do.
"""

from __future__ import annotations

import logging
import os
import socket
from urllib.parse import urlsplit

from ray._common.network_utils import parse_address
from ray._private import services

from kifqa.config import Settings
from kifqa.errors import ConfigError

log = logging.getLogger(__name__)

#: Seconds a cluster's GCS (or Ray client server) has to take a connection.
PROBE_TIMEOUT_S = 5.0
#: The Ray client server's port when a ``ray://`` address names none.
_CLIENT_PORT = 10001


def ray_address(settings: Settings) -> str | None:
    """The ``address`` for ``ray.init``: ``batch.ray_address`` as given (Ray reads ``RAY_ADDRESS`` and its
    address file itself), or ``"local"`` where only a stale address file names a cluster."""
    given = settings.batch.ray_address or os.environ.get("RAY_ADDRESS") or None
    if given == "local":
        return settings.batch.ray_address
    if given is None:
        recorded = services.find_bootstrap_address(None)
        if recorded and not _answers(recorded):
            log.warning("Ray's address file names a cluster at %s that does not answer (it ended without `ray "
                        "stop`): starting a local cluster instead", recorded)
            return "local"
        return None
    target = _target(given)
    if not _answers(target):
        raise ConfigError(f"no Ray cluster answers at {target} (the address {given}: --address, batch.ray_address or "
                          "RAY_ADDRESS): start it, give the address of a running one, or leave the address out to "
                          "start a local cluster")
    return settings.batch.ray_address


def _target(given: str) -> str:
    """The ``host:port`` that ``given`` names (``auto`` resolved as Ray resolves it: ``RAY_ADDRESS``, Ray's
    address file, a cluster running on this machine)."""
    if "://" in given:
        parts = urlsplit(given)
        return f"{parts.hostname}:{parts.port or _CLIENT_PORT}"
    if given != "auto":
        if parse_address(given) is None:
            raise ConfigError(f"{given} is not a Ray address (--address, batch.ray_address, RAY_ADDRESS): give "
                              "host:port, ray://host:port or auto")
        return given
    try:
        target = services.canonicalize_bootstrap_address(given)
    except ConnectionError:  # none found
        target = None
    if target is None:
        raise ConfigError("no Ray cluster is running on this machine (--address auto): start one (`ray start "
                          "--head`), give the address of a running one, or leave the address out to start a "
                          "local cluster")
    return target


def _answers(address: str) -> bool:
    """Whether something takes a TCP connection at ``host:port`` within :data:`PROBE_TIMEOUT_S`."""
    parsed = parse_address(address)
    if parsed is None:
        return False
    host, port = parsed
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S):
            return True
    except (OSError, ValueError):
        return False
