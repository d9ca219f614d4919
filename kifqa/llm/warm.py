"""Shared prefixes' KV states computed ahead of a run, on several local model instances at once.

One llama.cpp instance on one thread scales with instances, not with threads, so ``kifqa model warm``
opens one instance per core and splits the prefixes (few-shot blocks, the relation choice's system
prompt) between them. The instances must be configured as the run's are (slots, context): a state's key
holds those settings, and a run finds only the states its own instances would compute.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TypeVar

from kifqa.llm.base import ChatRequest
from kifqa.llm.blockstate import BlockStats
from kifqa.llm.local import LocalLLM

T = TypeVar("T")


@dataclass(frozen=True)
class Warmed:
    """What warming did: each instance's share and what the shares cost."""

    #: Requests each instance prepared, in the order of the instances.
    shares: tuple[int, ...]
    #: Prefix states computed and saved now, and the ones already saved (restored to check them).
    computed: int
    restored: int
    #: State files found invalid (another key, cut, corrupt), then computed again.
    refused: int
    #: Bytes of the states saved or restored.
    bytes: int
    #: Wall seconds loading the instances, then preparing the prefixes.
    load_s: float
    prepare_s: float
    #: CPU seconds of this process (llama.cpp's threads included) while preparing the prefixes: over
    #: ``prepare_s``, how many cores the instances kept busy.
    prepare_cpu_s: float


def split(items: Sequence[T], parts: int) -> list[list[T]]:
    """``items`` dealt round-robin into ``parts`` lists (the few-shot blocks are of about one size, so each
    instance gets about as much work)."""
    if parts < 1:
        raise ValueError("split needs at least one part")
    return [list(items[i::parts]) for i in range(parts)]


def warm(models: Sequence[LocalLLM], requests: Sequence[ChatRequest], *,
         on_loaded: Callable[[], object] | None = None, on_done: Callable[[str], object] | None = None) -> Warmed:
    """Loads ``models`` side by side, then has each prepare its share of ``requests`` (one thread per
    instance; llama.cpp releases the GIL), so that each request's shared prefix has a valid state on disk.

    Args:
        models: Local model instances, configured alike.
        requests: Requests naming a shared prefix (``ChatRequest.prefix_key``).
        on_loaded: Called once every instance is loaded, before the first prefix (a progress bar's start).
        on_done: Called after each request with :meth:`LocalLLM.prepare`'s outcome (``computed``,
            ``restored`` or ``none``), from the instance's thread.
    """
    if not models:
        raise ValueError("warm needs at least one model instance")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(models), thread_name_prefix="warm") as pool:
        list(pool.map(LocalLLM.load, models))
    loaded, cpu = time.perf_counter(), time.process_time()
    if on_loaded is not None:
        on_loaded()
    before = [replace(m.blocks()) for m in models]  # copies: an instance's counters keep counting
    lock = threading.Lock()

    def prepare(model: LocalLLM, share: list[ChatRequest]) -> None:
        for request in share:
            outcome = model.prepare(request)
            if on_done is not None:
                with lock:
                    on_done(outcome)

    shares = split(requests, len(models))
    with ThreadPoolExecutor(max_workers=len(models), thread_name_prefix="warm") as pool:
        list(pool.map(prepare, models, shares))
    done = BlockStats.total(m.blocks() - b for m, b in zip(models, before)) or BlockStats()
    return Warmed(shares=tuple(map(len, shares)), computed=done.computed, restored=done.restored,
                  refused=done.refused, bytes=done.bytes, load_s=loaded - start,
                  prepare_s=time.perf_counter() - loaded, prepare_cpu_s=time.process_time() - cpu)
