"""Build folders made side by side and swapped in atomically; a build in use is never removed.

``<kb>/<name>`` is a symbolic link to the current build, ``<kb>/<name>-<token>/``. A new build is written
into a folder of its own, and the link is replaced in one ``rename``: a reader sees the old build or the
new one, never half of one, and concurrent builders never write into the same folder. Every process that
uses a build (an in-process store, ``kifqa kb serve``, a Virtuoso loaded from it) holds a shared
``flock`` on its ``.in-use`` file until it exits; a builder writes under an exclusive one. Old builds are
removed only when nobody holds their lock (an exclusive, non-blocking ``flock`` succeeds), so a running
server or job keeps its build whatever ``kifqa kb build --force`` does; the next build sweeps it once free.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

from kifqa.errors import KBError

#: The lock file in every build folder.
LOCK = ".in-use"

#: Build folders this process uses, with their locks' descriptors (held until the process exits).
_HELD: dict[Path, int] = {}


def current(final: Path) -> Path:
    """The folder ``final`` names now (a link's target; a folder of the older layout is itself)."""
    return final.resolve()


def use(final: Path) -> Path | None:
    """The build folder ``final`` names now, marked in use by this process until it exits; ``None`` if
    there is none. A folder of the older layout (no link, no lock) is used in place."""
    for _ in range(3):  # a sweep may remove the target between resolving the link and locking it
        if final.is_dir() and not final.is_symlink():  # older layout: locked in place where it can be
            try:
                (final / LOCK).touch()
            except OSError:  # a read-only cache folder: nothing can replace the build either
                return final
            return final if hold(final) else None
        root = current(final)
        if not root.is_dir():
            return None
        if hold(root):
            return root
    return None


def hold(root: Path) -> bool:
    """Marks the build folder ``root`` in use by this process until it exits (a shared lock; it waits
    while a sweep is deciding about the folder). False if ``root`` has no lock file (being removed)."""
    if root in _HELD:
        return True
    try:
        fd = os.open(root / LOCK, os.O_RDONLY)
    except OSError:
        return False
    fcntl.flock(fd, fcntl.LOCK_SH)
    if not (root / LOCK).exists():  # swept while we waited
        os.close(fd)
        return False
    _HELD[root] = fd
    return True


def publish(final: Path, write: Callable[[Path], None], *,
            keep_existing: Callable[[], bool]) -> tuple[Path, bool]:
    """Writes a new build with ``write(folder)`` beside the others and points ``final`` at it, unless
    ``keep_existing()`` says, once it is written, that another process published an equal build meanwhile
    (then that one stays and the new folder is removed). Returns the folder ``final`` points at, which
    this process holds, and whether it is the new one. Unused older builds of ``final`` are removed."""
    parent, name = final.parent, final.name
    parent.mkdir(parents=True, exist_ok=True)
    folder = parent / f"{name}-{secrets.token_hex(6)}"
    folder.mkdir()
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # being written: no sweep touches it
    try:
        write(folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)
        raise
    fcntl.flock(fd, fcntl.LOCK_SH)  # done: in use by this process, like any reader's
    _HELD[folder] = fd
    if keep_existing() and (existing := use(final)) is not None:
        _release(folder)
        return existing, False
    if final.is_dir() and not final.is_symlink():  # a build of the older layout: moved aside, then swept
        _move_aside(final, parent / f"{name}-{secrets.token_hex(6)}", new=folder)
    link = parent / f".link-{name}-{secrets.token_hex(6)}"
    link.symlink_to(folder.name)
    os.replace(link, final)  # the swap: atomic
    sweep(final)
    return folder, True


def sweep(final: Path) -> list[Path]:
    """Removes the builds of ``final`` that it does not point at and nobody uses; returns them."""
    keep = current(final)
    removed = []
    for folder in sorted(final.parent.glob(f"{final.name}-*")):
        if folder == keep or folder in _HELD or folder.is_symlink() or not folder.is_dir():
            continue
        try:
            fd = os.open(folder / LOCK, os.O_RDONLY)
        except OSError:  # a builder that has just made its folder, or not a build
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # in use, or being written
            os.close(fd)
            continue
        try:
            (folder / LOCK).unlink()  # first, so that a reader waiting on the lock sees it is gone
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        finally:
            os.close(fd)
    return removed


def _move_aside(final: Path, aside: Path, *, new: Path) -> None:
    """Renames the older layout's build folder ``final`` to ``aside`` unless a process uses it (renaming
    it would pull it from under that process): then :class:`KBError`, and the new build is dropped."""
    (final / LOCK).touch()
    if final in _HELD:  # this process's own use of it ends here
        os.close(_HELD.pop(final))
    fd = os.open(final / LOCK, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _release(new)
            raise KBError(f"{final} (a build of the older layout) is in use by another process (a server or "
                          "a job?); stop it, then run `kifqa kb build --force` again") from None
        final.rename(aside)
    finally:
        os.close(fd)


def _release(folder: Path) -> None:
    """Stops using ``folder`` and removes it (this process wrote it and nobody else knows it)."""
    os.close(_HELD.pop(folder))
    shutil.rmtree(folder, ignore_errors=True)
