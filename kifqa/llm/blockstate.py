"""Saved KV states of shared prompt prefixes (few-shot blocks), once per machine and model.

llama.cpp's server saves a slot's KV cache to a file and restores it into a slot
(``POST /slots/ID?action=save|restore``, files under ``slot_save_path``). A prefix evaluated once is
saved as ``<key>.bin`` under ``<cache_dir>/kv/``; the key is the SHA-256 of everything its state
depends on (:class:`StateKey`: the model file's SHA-256, the exact prompt tokens, the llama.cpp build
and the context settings), so a file is only found by a run that would compute the same state. Each
file has a sidecar ``<key>.json`` holding that key and the file's length and SHA-256: a file whose
sidecar names another key, or whose length or digest differ (cut, corrupt), is refused and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from kifqa.llm.weights import KNOWN_MODELS
from kifqa.sqlite import private_dir

#: Bumped when the layout of the files or the key changes.
FORMAT = 1


@dataclass
class BlockStats:
    """What the shared prefixes (few-shot blocks) of one model instance cost so far."""

    #: Prefix states restored from disk into a slot, and the seconds that took (verification included).
    restored: int = 0
    restore_s: float = 0.0
    #: Prefix states evaluated (none valid on disk) and saved, and the seconds that took.
    computed: int = 0
    compute_s: float = 0.0
    #: State files found but refused (another key in the sidecar, wrong length or digest), then recomputed.
    refused: int = 0
    #: Bytes of the states saved or restored.
    bytes: int = 0

    def __add__(self, other: BlockStats) -> BlockStats:
        return BlockStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __sub__(self, other: BlockStats) -> BlockStats:
        return BlockStats(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})

    @staticmethod
    def total(each: Iterable[BlockStats | None]) -> BlockStats | None:
        """The sum of those of ``each`` that are not None; None when all are."""
        kept = [b for b in each if b is not None]
        return sum(kept, BlockStats()) if kept else None


@dataclass(frozen=True)
class StateKey:
    """What a prefix's KV state depends on."""

    model_sha256: str
    tokens: tuple[int, ...]
    llama_build: str
    context: dict[str, Any]

    @property
    def digest(self) -> str:
        """The file name's stem: the SHA-256 of the key."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self), "tokens": list(self.tokens)}


class StateStore:
    """The folder of saved states; llama.cpp's ``slot_save_path`` (it reads and writes the ``.bin``
    files itself, by name)."""

    def __init__(self, folder: Path) -> None:
        self.folder = private_dir(Path(folder))  # the states hold the few-shot prompts

    def name(self, key: StateKey) -> str:
        """The state file's name inside :attr:`folder`."""
        return f"{key.digest}.bin"

    def valid(self, key: StateKey) -> bool:
        """True if the state of ``key`` is on disk, its sidecar names exactly ``key`` and the file has
        the recorded length and SHA-256."""
        path = self.folder / self.name(key)
        try:
            side = json.loads(path.with_suffix(".json").read_text())
            size = path.stat().st_size
        except (OSError, ValueError):
            return False
        return (isinstance(side, dict) and side.get("key") == key.to_dict() and side.get("bytes") == size
                and side.get("sha256") == file_sha256(path))

    def temp_name(self, key: StateKey) -> str:
        """A name for llama.cpp to save a new state under before :meth:`commit` moves it into place."""
        return f"tmp-{key.digest}-{os.getpid()}-{id(self):x}.bin"

    def commit(self, key: StateKey, temp_name: str) -> int:
        """Moves a freshly saved state into place with its sidecar (written first, each by rename, so a
        reader sees either the old pair, the new pair or a pair that fails :meth:`valid`); returns its
        size in bytes."""
        temp = self.folder / temp_name
        size = temp.stat().st_size
        side = {"key": key.to_dict(), "bytes": size, "sha256": file_sha256(temp)}
        final = self.folder / self.name(key)
        side_temp = temp.with_suffix(".json")
        side_temp.write_text(json.dumps(side))
        os.replace(side_temp, final.with_suffix(".json"))
        os.replace(temp, final)
        return size

    def discard(self, temp_name: str) -> None:
        """Removes a temporary state that could not be committed."""
        (self.folder / temp_name).unlink(missing_ok=True)


def model_sha256(path: Path, name: str, *, folder: Path) -> str:
    """The SHA-256 of a model file: a known model's (its file was verified when assembled), else the
    file's own, computed once and kept in ``folder`` for as long as the file's size and mtime stay."""
    if name in KNOWN_MODELS:
        return KNOWN_MODELS[name].sha256
    st = path.stat()
    resolved = str(path.resolve())
    seen = {"path": resolved, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    stamp = folder / f"model-{hashlib.sha256(resolved.encode()).hexdigest()[:16]}.json"
    try:
        known = json.loads(stamp.read_text())
        if {k: known.get(k) for k in seen} == seen:
            return str(known["sha256"])
    except (OSError, ValueError, KeyError):
        pass
    digest = file_sha256(path)
    stamp.write_text(json.dumps(seen | {"sha256": digest}))
    return digest


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
