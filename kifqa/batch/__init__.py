"""Batch question answering on Ray: :func:`run_job` answers a corpus into Parquet files.

The driver cuts the corpus into shards and runs one Ray task per shard; a task runs its questions
concurrently through the same :class:`~kifqa.pipeline.Pipeline` as ``kifqa ask``, with actor-backed
implementations of the model (:class:`ActorLLM`) and knowledge-base (:class:`ActorKB`) interfaces.
This package is the only one in kifqa that imports Ray.
"""

from __future__ import annotations

from kifqa.batch.corpus import Corpus, read_corpus
from kifqa.batch.driver import run_job
from kifqa.batch.kbpool import ActorKB
from kifqa.batch.llmpool import ActorLLM
from kifqa.batch.manifest import job_key
from kifqa.batch.output import OutputDir
from kifqa.batch.pools import Pools, actor_pools
from kifqa.batch.summary import Summary

__all__ = ["ActorKB", "ActorLLM", "Corpus", "OutputDir", "Pools", "Summary", "actor_pools", "job_key", "read_corpus",
           "run_job"]
