"""Batch question answering on Ray: :func:`run_job` answers a corpus into a run folder (:mod:`kifqa.runs`).

The driver cuts the corpus into shards and runs one Ray task per shard; a task runs its questions
concurrently through the same :class:`~kifqa.pipeline.Pipeline` as ``kifqa ask``, with actor-backed
implementations of the model and knowledge-base interfaces. This package owns starting and running
jobs (the actor pools, the shared endpoint limits, the KB cache, resume); it is the only one in kifqa
that imports Ray. Reading a run folder back needs no Ray: see :mod:`kifqa.runs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kifqa.lazy import exports

if TYPE_CHECKING:
    from kifqa.batch.driver import run_job
    from kifqa.batch.pools import Pools, actor_pools
    from kifqa.batch.summary import Summary

__all__ = ["Pools", "Summary", "actor_pools", "run_job"]
#: Imported on first use: an LLM actor's worker imports only :mod:`kifqa.batch.llmpool` and the model
#: backends, not the driver, the KB layer and KIF, which take several times longer to import.
__getattr__ = exports(__name__, {"run_job": "kifqa.batch.driver", "Pools": "kifqa.batch.pools",
                                 "actor_pools": "kifqa.batch.pools", "Summary": "kifqa.batch.summary"})
