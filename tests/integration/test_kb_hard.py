"""The hard base's distractors on the real data: deterministic whatever the hash seed, every real statement
kept and no real fact given a second value, synthetic ids and names as promised, and the fan-out and
homonym targets met on the test split's topics."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kifqa.data import paths
from kifqa.data.text import index_key
from kifqa.data.wikidata import Dataset, load
from kifqa.kb import hard

pytestmark = pytest.mark.slow

_DIGEST = """
import hashlib, sys
from pathlib import Path
from kifqa.data.wikidata import load
from kifqa.kb import hard
d = Path(sys.argv[1]); data = load(d)
x = hard.generate(data, hard.read_ontology(d / "dbpedia/ontology.ttl"))
h = hashlib.sha256()
for t in x.triples: h.update(f"{t.subject}\\t{t.property}\\t{t.value}\\n".encode())
for id, r in x.items.items(): h.update(f"{id}\\t{r.label}\\t{r.aliases}\\n".encode())
print(h.hexdigest())
"""


def _digest(x: hard.Distractors) -> str:
    h = hashlib.sha256()
    for t in x.triples:
        h.update(f"{t.subject}\t{t.property}\t{t.value}\n".encode())
    for id, r in x.items.items():
        h.update(f"{id}\t{r.label}\t{r.aliases}\n".encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def real(data_dir: Path) -> tuple[Dataset, hard.Distractors]:
    data = load(data_dir)
    return data, hard.generate(data, hard.read_ontology(data_dir / paths.ONTOLOGY))


def test_same_seed_same_distractors_in_another_process(data_dir: Path, real: tuple[Dataset, hard.Distractors]) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # sets iterate in another order there
    out = subprocess.run([sys.executable, "-c", _DIGEST, str(data_dir)], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == _digest(real[1])


def test_real_statements_stay_and_keep_their_answers(real: tuple[Dataset, hard.Distractors]) -> None:
    data, x = real
    extended = x.extend(data)
    assert extended.triples[:len(data.triples)] == data.triples
    real_forward = {(t.subject, t.property) for t in data.triples}
    assert not [t for t in x.triples if (t.subject, t.property) in real_forward]
    assert len(x.triples) > 20 * len(data.triples)


def test_synthetic_items_have_free_ids_and_data_labels(real: tuple[Dataset, hard.Distractors]) -> None:
    data, x = real
    data_names = {index_key(n) for r in data.items.values() for n in (r.label, *r.aliases)}
    assert x.items and not x.items.keys() & data.items.keys()
    assert all(int(id[1:]) > hard.SYNTHETIC_BASE for id in x.items)
    assert all(index_key(n) in data_names for r in x.items.values() for n in (r.label, *r.aliases))
    with_statements = {t.subject for t in x.triples} | {t.value for t in x.triples}
    assert sum(id in with_statements for id in x.items) >= 0.95 * len(x.items)


def test_fan_out_and_homonym_targets_on_the_test_topics(data_dir: Path, real: tuple[Dataset, hard.Distractors]) -> None:
    data, x = real
    stats = hard.statistics_of(data, x, hard.test_topics(data_dir, data))
    assert stats["fan_out_real"]["median"] == 1
    assert stats["fan_out_hard"]["median"] >= 20 and stats["fan_out_hard"]["p90"] >= 50
    assert stats["homonym_share"] >= 0.3
