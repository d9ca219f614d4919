"""``kifqa kb build``: the data folder as an on-disk Oxigraph store plus a label index, built once per input hash.

A build lives in ``<cache_dir>/kb/<hash>/`` (``kb.nt``, ``oxigraph/``, ``labels.sqlite``, ``manifest.json``),
where the hash covers the input files and :data:`VERSION`. It is written to a temporary folder and
renamed into place when complete, so a half-written build never counts as done.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyoxigraph

from kifqa.config import Settings
from kifqa.errors import KBError
from kifqa.kb import data, index, rdf

#: The builder's version: part of the build hash, so bumping it rebuilds every base.
VERSION = "2"

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class BuiltKB:
    """A complete build."""

    root: Path
    manifest: dict[str, Any]

    @property
    def digest(self) -> str:
        return str(self.manifest["hash"])

    @property
    def store_dir(self) -> Path:
        return self.root / "oxigraph"

    @property
    def index_path(self) -> Path:
        return self.root / "labels.sqlite"

    @property
    def rdf_path(self) -> Path:
        return self.root / "kb.nt"


def kb_dir(settings: Settings) -> Path:
    return settings.cache_dir / "kb"


def _complete(root: Path, digest: str) -> BuiltKB | None:
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    built = BuiltKB(root, manifest)
    ok = manifest.get("hash") == digest and built.store_dir.is_dir() and built.index_path.is_file()
    return built if ok else None


def locate(settings: Settings) -> BuiltKB:
    """The build of the current data folder; :class:`KBError` if there is none."""
    digest = data.inputs_digest(settings.data_dir, VERSION)
    built = _complete(kb_dir(settings) / digest, digest)
    if built is None:
        raise KBError(f"no knowledge base is built for the data in {settings.data_dir} (hash {digest}) "
                      f"under {kb_dir(settings)}; run `kifqa kb build`")
    return built


def build(settings: Settings, *, force: bool = False) -> tuple[BuiltKB, bool]:
    """Builds the knowledge base unless an identical build exists; returns it and whether it was built now."""
    digest = data.inputs_digest(settings.data_dir, VERSION)
    final = kb_dir(settings) / digest
    if not force and (built := _complete(final, digest)):
        return built, False
    tmp = kb_dir(settings) / f".tmp-{digest}-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir(parents=True)
    try:
        _write(tmp, settings.data_dir, digest)
        if final.exists():
            trash = kb_dir(settings) / f".old-{digest}-{secrets.token_hex(4)}"
            final.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)
        try:
            tmp.rename(final)
        except OSError:  # another process finished the same build first
            if not (built := _complete(final, digest)):
                raise
            return built, False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    built = _complete(final, digest)
    assert built is not None
    return built, True


def _write(root: Path, data_dir: Path, digest: str) -> None:
    started = time.perf_counter()
    dataset = data.load(data_dir)
    built = BuiltKB(root, {})
    with open(built.rdf_path, "w", encoding="utf-8") as f:
        rdf_triples = 0
        for line in rdf.lines(dataset):
            f.write(line)
            rdf_triples += 1
    store = pyoxigraph.Store(str(built.store_dir))
    store.bulk_load(path=str(built.rdf_path), format=pyoxigraph.RdfFormat.N_TRIPLES)
    store.flush()
    del store  # closes the database before the folder is renamed
    counts = index.build(built.index_path, dataset)
    manifest = {
        "hash": digest,
        "version": VERSION,
        "data_dir": str(data_dir),
        "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - started, 2),
        "counts": {"statements": len(dataset.triples), "rdf_triples": rdf_triples, **counts},
    }
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
