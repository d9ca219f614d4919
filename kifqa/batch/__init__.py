"""Batch question answering on Ray: :func:`run_job` answers a corpus into a run folder (:mod:`kifqa.runs`).

The driver cuts the corpus into shards and runs one Ray task per shard; a task runs its questions
concurrently through the same :class:`~kifqa.pipeline.Pipeline` as ``kifqa ask``, with actor-backed
implementations of the model and knowledge-base interfaces. This package owns starting and running
jobs (the actor pools, the shared endpoint limits, the KB cache, resume); it is the only one in kifqa
that imports Ray. Reading a run folder back needs no Ray: see :mod:`kifqa.runs`.
"""

from __future__ import annotations

from kifqa.batch.driver import run_job
from kifqa.batch.pools import Pools, actor_pools
from kifqa.batch.summary import Summary

__all__ = ["Pools", "Summary", "actor_pools", "run_job"]
