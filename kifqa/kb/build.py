"""``kifqa kb build``: the data folder as an on-disk Oxigraph store plus a label index, built once per input hash.

A build lives in ``<cache_dir>/kb/<hash>/`` (``kb.nt``, ``oxigraph/``, ``labels.sqlite``, ``manifest.json``),
where the hash covers the input files, :data:`VERSION` and the label index's: a link to the folder of the current build,
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
from kifqa.kb import hard as hard_base
from kifqa.kb import index, rdf, swap

#: The builder's version: part of the build hash, so bumping it rebuilds every base.
VERSION = "3"
#: The versions every Wikidata-encoded build's hash covers: the builder's and its label index's.
_VERSIONS = f"{VERSION}/index-{index.VERSION}"

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


def inputs_digest(data_dir: Path, *, hard: bool = False) -> str:
    """The hash of the local base's inputs: the Wikidata inputs, the builder's and the label index's versions;
    for the ``hard`` base also the ontology, the generator's version and the seed."""
    if hard:
        return paths.inputs_digest(data_dir, f"{_VERSIONS}/hard-{hard_base.VERSION}/seed-{hard_base.SEED}",
                                   (*paths.WIKIDATA_INPUTS, paths.ONTOLOGY))
    return paths.inputs_digest(data_dir, _VERSIONS)


def _digest_and_final(settings: Settings, hard: bool) -> tuple[str, Path]:
    digest = inputs_digest(settings.data_dir, hard=hard)
    return digest, kb_dir(settings) / (f"hard-{digest}" if hard else digest)


def locate(settings: Settings, *, hard: bool = False) -> BuiltKB:
    """The build of the current data folder (``hard``: the hard base, :mod:`kifqa.kb.hard`), marked in use
    by this process; :class:`KBError` if there is none."""
    digest, final = _digest_and_final(settings, hard)
    built = read_build(BuiltKB, final, digest)
    if built is None:
        what = "hard knowledge base" if hard else "knowledge base"
        raise KBError(f"no {what} is built for the data in {settings.data_dir} (hash {digest}) "
                      f"under {kb_dir(settings)}; run `kifqa kb build{' --hard' if hard else ''}`")
    return built


def build(settings: Settings, *, force: bool = False, hard: bool = False) -> tuple[BuiltKB, bool]:
    """Builds the knowledge base (``hard``: the hard base) unless an identical build exists; returns it and
    whether it was built now."""
    digest, final = _digest_and_final(settings, hard)
    return build_once(BuiltKB, final, digest,
                      lambda root: _write(root, settings.data_dir, digest, hard=hard), force=force)


def _write(root: Path, data_dir: Path, digest: str, *, hard: bool = False) -> None:
    started = time.perf_counter()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:
        phases[name] = round(time.perf_counter() - started - sum(phases.values()), 2)

    dataset = wikidata.load(data_dir)
    extra: dict[str, Any] = {}
    if hard:
        distractors = hard_base.generate(dataset, hard_base.read_ontology(data_dir / paths.ONTOLOGY))
        distractors.write(root)
        extra["hard"] = {"seed": hard_base.SEED, "version": hard_base.VERSION,
                         **hard_base.statistics_of(dataset, distractors, hard_base.test_topics(data_dir, dataset))}
        dataset = distractors.extend(dataset)
        phase("distractors")
    built = BuiltKB(root, {})
    with open(built.rdf_path, "w", encoding="utf-8") as f:
        rdf_triples = 0
        for line in rdf.lines(dataset):
            f.write(line)
            rdf_triples += 1
    phase("rdf")
    store = pyoxigraph.Store(str(built.store_dir))
    store.bulk_load(path=str(built.rdf_path), format=pyoxigraph.RdfFormat.N_TRIPLES)
    store.flush()
    del store  # closes the database before the folder is renamed
    phase("load")
    counts = index.build(built.index_path, dataset)
    phase("index")
    if hard:
        built.rdf_path.unlink()  # loaded; 0.7 GB that nothing reads again (distractors.tsv has what it adds)
        extra["phases_s"] = phases
    manifest = {
        "hash": digest,
        "version": VERSION,
        "data_dir": str(data_dir),
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - started, 2),
        "counts": {"statements": len(dataset.triples), "rdf_triples": rdf_triples, **counts},
        "bytes": sum(f.stat().st_size for f in root.rglob("*") if f.is_file()),
        **extra,
    }
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
