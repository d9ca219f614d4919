"""What every run on this machine reuses, prepared ahead by ``kifqa model warm``: the example pool's
embeddings, plain and masked, cached on disk, and the requests whose shared prefixes the model keeps.

A run that finds them cached starts answering at once instead of embedding the pool (a minute or more
on 2 cores) or evaluating each few-shot block on its first question.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from kifqa.config import Settings
from kifqa.examples import open_examples
from kifqa.examples.embeddings import EmbeddedPool
from kifqa.examples.precedents import Precedents
from kifqa.examples.sources import ExampleSource
from kifqa.examples.vectors import KEPT
from kifqa.llm.base import ChatRequest
from kifqa.pipeline import draft, relations


def embed_pools(settings: Settings) -> ExampleSource:
    """The configured example source, with every pool embedding a run needs computed and cached: the pool's
    questions (examples, clusters) and, where the relation step's precedent votes are on, the pool's
    questions with their entity masked (:class:`~kifqa.examples.precedents.Precedents`), as the run opens them."""
    return _embedded(settings)[0]


def pool_embeddings(settings: Settings) -> dict[str, np.ndarray]:
    """Every pool embedding a run needs (:func:`embed_pools`), by its cache file's path under
    ``settings.cache_dir``: what a job computes once and hands to every node (a node whose cache lacks one
    saves it there with :func:`~kifqa.examples.embeddings.keep` instead of encoding the pool)."""
    return {str(p.cache_file.relative_to(settings.cache_dir)): p.matrix
            for p in _embedded(settings)[1] if p.cache_file is not None}


def _embedded(settings: Settings) -> tuple[ExampleSource, list[EmbeddedPool]]:
    """The configured example source and the embedded pools a run opens with it."""
    source = open_examples(settings.examples, data_dir=settings.data_dir, cache_dir=settings.cache_dir,
                           kb_spec=settings.kb.spec)
    pools = [] if source.pool is None else [source.pool]
    if settings.pipeline.precedent_neighbours and source.pool is not None:
        pools.append(Precedents(source.pool).masked)
    return source, pools


def shared_prefixes(settings: Settings, source: ExampleSource,
                    questions: Iterable[str] | None = None) -> list[ChatRequest]:
    """One request per shared prefix a run sends: each few-shot block of ``source`` as the draft sends
    it (only the blocks ``questions`` select, when given: a corpus's first run then waits for its own
    blocks alone, and a later question of another block computes that block on first use), then the
    relation choice's system prompt."""
    blocks = source.shared_blocks()
    if questions is not None:
        wanted = _prefix_keys(source, list(questions))
        blocks = {key: shots for key, shots in blocks.items() if key in wanted}
    requests = [draft.request("?", shots, prefix_key=key) for key, shots in blocks.items()]
    requests.append(relations.shared_prefix())
    return requests


def _prefix_keys(source: ExampleSource, questions: list[str]) -> set[str | None]:
    """The blocks ``questions`` select, their embeddings encoded in batches (:meth:`ExampleSource.prepare`; one at a
    time costs the encoder several times the CPU), a batch no larger than the process keeps
    (:data:`~kifqa.examples.vectors.KEPT`)."""
    keys: set[str | None] = set()
    for start in range(0, len(questions), KEPT):
        batch = questions[start:start + KEPT]
        source.prepare(batch)
        keys.update(map(source.prefix_key, batch))
    return keys
