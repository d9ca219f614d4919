"""``kifqa kb build``: the data folder as an on-disk Oxigraph store plus a label index, built once per input hash.

A build lives in ``<cache_dir>/kb/<hash>/`` (``kb.nt``, ``oxigraph/``, ``labels.sqlite``, ``manifest.json``),
where the hash covers the input files and :data:`VERSION`: a link to the folder of the current build,
which is written beside the others and switched to atomically when complete (:mod:`kifqa.kb.swap`), so a
half-written build never counts as done and a build in use is never removed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pyoxigraph

from kifqa.config import Settings
from kifqa.data import paths, wikidata
from kifqa.errors import KBError
from kifqa.kb import index, rdf, swap

#: The builder's version: part of the build hash, so bumping it rebuilds every base.
VERSION = "2"

MANIFEST = "manifest.json"


B = TypeVar("B", bound="Build")


@dataclass(frozen=True)
class Build:
    """A complete build folder: its manifest, RDF and label index."""

    root: Path
    manifest: dict[str, Any]

    @property
    def digest(self) -> str:
        return str(self.manifest["hash"])

    @property
    def index_path(self) -> Path:
        return self.root / "labels.sqlite"

    @property
    def rdf_path(self) -> Path:
        return self.root / "kb.nt"

    def complete(self) -> bool:
        """Whether every file of the build is there."""
        return self.index_path.is_file()

    @classmethod
    def read(cls: type[B], root: Path, digest: str) -> B | None:
        """The complete build of ``digest`` at ``root``, or ``None``."""
        try:
            manifest = json.loads((root / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        built = cls(root, manifest)
        return built if manifest.get("hash") == digest and built.complete() else None


@dataclass(frozen=True)
class BuiltKB(Build):
    """A complete build of the Wikidata-encoded base (Oxigraph store + label index)."""

    @property
    def store_dir(self) -> Path:
        return self.root / "oxigraph"

    def complete(self) -> bool:
        return self.store_dir.is_dir() and super().complete()


def build_hash(root: Path) -> str | None:
    """The hash in the manifest of the build folder ``root``, ``None`` if it has none."""
    try:
        return str(json.loads((root / MANIFEST).read_text())["hash"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def kb_dir(settings: Settings) -> Path:
    return settings.cache_dir / "kb"


def build_once(kind: type[B], final: Path, digest: str, write: Callable[[Path], None], *,
               force: bool = False) -> tuple[B, bool]:
    """The build ``final`` names unless ``force``; otherwise ``write`` fills a new folder beside it, and
    ``final`` is switched to it atomically once it is complete (:mod:`kifqa.kb.swap`: a build in use is
    never removed). Returns the build and whether it was made now."""
    if not force and (built := read_build(kind, final, digest)):
        return built, False
    root, made = swap.publish(final, write, keep_existing=lambda: not force and _complete(kind, final, digest))
    built = kind.read(root, digest)
    if built is None:
        raise KBError(f"the build at {root} is incomplete; run `kifqa kb build --force`")
    return built, made


def read_build(kind: type[B], final: Path, digest: str) -> B | None:
    """The complete build of ``digest`` that ``final`` names, marked in use by this process; or ``None``."""
    root = swap.use(final)
    return kind.read(root, digest) if root is not None else None


def _complete(kind: type[B], final: Path, digest: str) -> bool:
    return kind.read(swap.current(final), digest) is not None


def locate(settings: Settings) -> BuiltKB:
    """The build of the current data folder, marked in use by this process; :class:`KBError` if there is none."""
    digest = paths.inputs_digest(settings.data_dir, VERSION)
    built = read_build(BuiltKB, kb_dir(settings) / digest, digest)
    if built is None:
        raise KBError(f"no knowledge base is built for the data in {settings.data_dir} (hash {digest}) "
                      f"under {kb_dir(settings)}; run `kifqa kb build`")
    return built


def build(settings: Settings, *, force: bool = False) -> tuple[BuiltKB, bool]:
    """Builds the knowledge base unless an identical build exists; returns it and whether it was built now."""
    digest = paths.inputs_digest(settings.data_dir, VERSION)
    return build_once(BuiltKB, kb_dir(settings) / digest, digest,
                      lambda root: _write(root, settings.data_dir, digest), force=force)


def _write(root: Path, data_dir: Path, digest: str) -> None:
    started = time.perf_counter()
    dataset = wikidata.load(data_dir)
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
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - started, 2),
        "counts": {"statements": len(dataset.triples), "rdf_triples": rdf_triples, **counts},
    }
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
