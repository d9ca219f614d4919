"""The example pool: the labelled questions of a corpus over a base, and what the method draws from them.

:mod:`.pool` names and reads a pool (a built-in, or a user's file) and keys it by content; :mod:`.encoder` embeds
questions (:mod:`.vectors` keeps the embeddings, :mod:`.embeddings` the pool's); :mod:`.sources` and
:mod:`.clustered` choose the few-shot examples of a question; :mod:`.precedents` counts what similar pool questions
ask for; :mod:`.priors` says which dataset conventions the pool bears out; :mod:`.text` holds the question-text
rules the steps and the priors share. The pipeline receives an :class:`~.sources.ExampleSource` and names no
dataset.
"""

from __future__ import annotations

from pathlib import Path

from kifqa.config import ExamplesSettings
from kifqa.examples.clustered import ClusteredExamples
from kifqa.examples.pool import Pool, open_pool, pool_name
from kifqa.examples.sources import ExampleSource, FixedExamples, RetrievedExamples
from kifqa.sqlite import private_dir

__all__ = ["ExampleSource", "Pool", "configured_pool", "drawn_pool", "open_examples"]


def configured_pool(settings: ExamplesSettings, *, data_dir: Path, kb_spec: str) -> Pool:
    """The pool ``settings.pool`` names, or the base's own (:func:`~.pool.pool_name`)."""
    name = pool_name(settings.pool, kb_spec)
    return open_pool(name, data_dir=data_dir, language=settings.language, limit=settings.pool_limit)


def drawn_pool(settings: ExamplesSettings, *, data_dir: Path, kb_spec: str) -> Pool:
    """The pool the examples ``settings`` describe are drawn from: the fixed examples' for ``fixed``, else
    :func:`configured_pool`."""
    if settings.mode == "fixed":
        return FixedExamples().origin
    return configured_pool(settings, data_dir=data_dir, kb_spec=kb_spec)


def open_examples(settings: ExamplesSettings, *, data_dir: Path, cache_dir: Path, kb_spec: str) -> ExampleSource:
    """The example source ``settings`` describe over the configured pool (:func:`configured_pool`), its embeddings
    and clusters cached under ``cache_dir/examples`` by the pool's content."""
    if settings.mode == "fixed":
        return FixedExamples()
    pool = configured_pool(settings, data_dir=data_dir, kb_spec=kb_spec)
    cache = private_dir(cache_dir / "examples")
    if settings.mode == "retrieved":
        return RetrievedExamples(pool, k=settings.k, cache_dir=cache)
    return ClusteredExamples(pool, clusters=settings.clusters, block=settings.block, nearest=settings.nearest,
                             cache_dir=cache)
