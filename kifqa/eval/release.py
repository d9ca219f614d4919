"""A silver dataset as a folder a team can publish: Parquet splits by topic, near-duplicates folded, a dataset card.

``kifqa silver ... --release DIR`` writes, locally or at an object-store URI:

- ``data/train.parquet``, ``data/validation.parquet``, ``data/test.parquet``: the rows (:data:`RELEASE_SCHEMA`),
  split by topic entity, so that no entity a question is about appears in two splits (rows that share a topic are
  one group, and a group goes whole to the split its smallest entity id hashes to);
- ``README.md``: the dataset card, with the Hugging Face YAML header (license, task, the splits' files), so that
  ``datasets.load_dataset(DIR)`` reads it; it states the source corpus, model, base, endpoint, date and kifqa's
  version, the license the base's data carries, and how the confidence was calibrated;
- ``release.json``: the same provenance, for programs (``kifqa silver --recheck`` reads it).

Questions that are the same once case, accents, punctuation and spacing are folded are near-duplicates: the one
with the highest confidence stays.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kifqa.data.text import normalize
from kifqa.eval.silver import SILVER_SCHEMA
from kifqa.runs.storage import is_uri, local_path, write_file

#: The splits and their shares of the topic groups.
SPLITS: Mapping[str, float] = {"train": 0.8, "validation": 0.1, "test": 0.1}

#: A release's rows: the silver rows and the split each went to.
RELEASE_SCHEMA = SILVER_SCHEMA.append(pa.field("split", pa.string()))

#: The license of each kind of base's data (Hugging Face's license ids) and its name.
LICENSES: Mapping[str, tuple[str, str]] = {
    "wikidata": ("cc0-1.0", "Wikidata's data is CC0 1.0 (public domain)"),
    "dbpedia": ("cc-by-sa-3.0", "DBpedia's data is CC BY-SA 3.0; attribute DBpedia and share alike"),
}


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Where a release's rows came from, as its card and ``release.json`` state it."""

    corpus: str
    kb: str
    endpoint: str
    model: str
    kifqa_version: str
    date: str
    #: What rates the rows' confidence (:attr:`kifqa.eval.silver.Rater.method`).
    confidence: str = ""
    #: The confidence threshold the rows passed and how it was chosen (``kifqa silver --target-precision``:
    #: target precision, measured precision and coverage, and where they were measured), or none.
    calibration: Mapping[str, Any] | None = None
    #: The silver summary's counts (questions, rows, below threshold, not reproduced).
    counts: Mapping[str, Any] = field(default_factory=dict)

    @property
    def encoding(self) -> str:
        """``dbpedia`` for a DBpedia-shaped base, ``wikidata`` otherwise."""
        return "dbpedia" if "dbpedia" in self.kb else "wikidata"


@dataclass(frozen=True)
class Release:
    """What a release holds: rows per split and how many near-duplicates were folded."""

    splits: Mapping[str, int]
    folded: int


def folded(rows: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], int]:
    """One row per question as :func:`~kifqa.data.text.normalize` folds it (the most confident), in the order
    the rows came; and how many were folded away."""
    best: dict[str, Mapping[str, Any]] = {}
    order: list[str] = []
    total = 0
    for row in rows:
        total += 1
        key = normalize(row["question"])
        if key not in best:
            order.append(key)
            best[key] = row
        elif row["confidence"] > best[key]["confidence"]:
            best[key] = row
    return [best[k] for k in order], total - len(order)


def topics(row: Mapping[str, Any]) -> list[str]:
    """The entities a row is about: its relations' known entities."""
    return sorted({r["entity"] for r in row["relations"]})


def split_of(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each row's split: rows sharing a topic entity are one group (joined transitively), and a group goes to the
    split its smallest entity id hashes to."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for row in rows:
        entities = topics(row) or [f"row:{row['id']}"]
        for e in entities[1:]:
            a, b = root(entities[0]), root(e)
            if a != b:
                parent[max(a, b)] = min(a, b)
    # a group's root is its smallest entity id: each union keeps the smaller of two roots
    return [_bucket(root((topics(row) or [f"row:{row['id']}"])[0])) for row in rows]


def _bucket(key: str) -> str:
    """The split a group key hashes to, by :data:`SPLITS`' shares."""
    x = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
    edge = 0.0
    for name, share in SPLITS.items():
        edge += share
        if x < edge:
            return name
    return list(SPLITS)[-1]


def write_release(rows: Iterable[Mapping[str, Any]], dest: str | Path, provenance: Provenance) -> Release:
    """The release folder of ``rows`` at ``dest`` (a local path or a URI): splits, card and ``release.json``."""
    kept, n_folded = folded(rows)
    splits = split_of(kept)
    counts = {name: splits.count(name) for name in SPLITS}
    base = str(dest).rstrip("/") if is_uri(dest) else str(local_path(dest))
    for name in SPLITS:
        table = pa.Table.from_pylist([{**r, "split": s} for r, s in zip(kept, splits) if s == name],
                                     schema=RELEASE_SCHEMA)
        sink = io.BytesIO()
        pq.write_table(table, sink)
        write_file(f"{base}/data/{name}.parquet", sink.getvalue())
    release = Release(splits=counts, folded=n_folded)
    meta = {**asdict(provenance), "splits": counts, "folded": n_folded, "schema": RELEASE_SCHEMA.names}
    write_file(f"{base}/release.json", (json.dumps(meta, indent=2) + "\n").encode())
    write_file(f"{base}/README.md", card(provenance, release).encode())
    return release


#: Hugging Face's size categories, by the row count they end below.
_SIZES = ((1000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
          (float("inf"), "n>1M"))


def card(provenance: Provenance, release: Release) -> str:
    """The dataset card: the Hugging Face YAML header, then what the data is and how it was made."""
    license_id, license_text = LICENSES[provenance.encoding]
    total = sum(release.splits.values())
    size = next(name for bound, name in _SIZES if total < bound)
    files = "".join(f"  - split: {name}\n    path: data/{name}.parquet\n" for name in SPLITS)
    calibration = provenance.calibration
    if calibration:
        confidence = (f"Rows were kept at confidence >= {calibration.get('threshold')}, the threshold chosen for "
                      f"precision {calibration.get('target_precision')} on labelled questions "
                      f"({calibration.get('source', 'a kifqa eval run')}): measured precision "
                      f"{calibration.get('precision')} at coverage {calibration.get('coverage')}.")
    else:
        confidence = ("No confidence threshold was applied to this release: every answered question whose query "
                      "reproduced its answers was kept. Its precision is not measured.")
    if provenance.confidence:
        confidence += f" The `confidence` column is rated by: {provenance.confidence}."
    counts = ", ".join(f"{k} {v}" for k, v in provenance.counts.items())
    return f"""---
license: {license_id}
language:
- en
task_categories:
- question-answering
tags:
- kbqa
- knowledge-graph
- {provenance.encoding}
- silver
pretty_name: kifqa silver KBQA over {provenance.kb}
size_categories:
- {size}
configs:
- config_name: default
  data_files:
{files}---

# Silver KBQA data over {provenance.kb}

Simple questions, each with one executable SPARQL query in the form KBQA datasets carry and the answers that
query gave, made by kifqa with the KIF-QA method over [KIF](https://github.com/IBM/kif) (a small LLM drafts a
triple pattern, KIF finds the entities and properties, KIF filters give the answers). The answers are silver:
machine-made, not checked by a person.

| | |
| --- | --- |
| source corpus | {provenance.corpus} |
| knowledge base | {provenance.kb} |
| endpoint | {provenance.endpoint} |
| model | {provenance.model} |
| made on | {provenance.date} |
| kifqa version | {provenance.kifqa_version} |
| rows | {total} ({", ".join(f"{k} {v}" for k, v in release.splits.items())}) |

## License

{license_text}; the rows' answers and queries are facts of that base. The questions are the source corpus's and
keep its license.

## How it was made

- Each row's `query` was executed again against the base it was answered from and gave exactly the row's `answers`;
  rows whose query did not were left out. `kif_filter` and `kif_sparql` keep KIF's own filter and compiled query.
- Splits are by topic: no entity a question is about appears in two splits.
- Questions that are the same once case, accents, punctuation and spacing are folded appear once
  ({release.folded} folded).
- {confidence}
- The silver run's counts: {counts or "not given"}.

`kifqa silver --recheck DIR` executes the queries again against today's base and reports the rows whose answers
changed.
"""
