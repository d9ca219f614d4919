"""Concurrent ``kifqa kb build`` runs and ``--force`` under a running server, in real processes: builds
are made side by side and swapped in atomically, and a build in use is never removed (tiny data)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from kifqa.config import Settings
from kifqa.kb.build import inputs_digest, kb_dir

Maker = Callable[..., Settings]
REPO = Path(__file__).resolve().parents[2]
#: Holds the current build (as every reader does) and serves it until stdin closes; prints its store folder.
SERVE = """
import sys
from kifqa.config import Settings
from kifqa.kb.build import locate
from kifqa.kb.server import OxigraphServer
built = locate(Settings())
with OxigraphServer(built.store_dir) as server:
    print(server.url, built.root, flush=True)
    sys.stdin.read()
"""


def _env(settings: Settings) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "KIFQA_DATA_DIR": str(settings.data_dir),
            "KIFQA_CACHE_DIR": str(settings.cache_dir)}


def _kb(settings: Settings, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", "from kifqa.cli import main; main()", "kb", *args], env=_env(settings), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _done(process: subprocess.Popen[str]) -> str:
    out, _ = process.communicate(timeout=300)
    assert process.returncode == 0, out
    return out


@contextmanager
def _serving(settings: Settings) -> Iterator[tuple[str, Path]]:
    """Another process serving the current build (``kifqa kb serve`` as a library call)."""
    server = subprocess.Popen([sys.executable, "-c", SERVE], env=_env(settings), cwd=REPO, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        url, root = server.stdout.readline().split()
        yield url, Path(root)
    finally:
        server.stdin.close()
        server.wait(timeout=30)


def _triples(url: str) -> int:
    answer = httpx.get(url, params={"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"},
                       headers={"Accept": "application/sparql-results+json"}, timeout=10)
    return int(answer.json()["results"]["bindings"][0]["n"]["value"])


def _current(settings: Settings) -> Path:
    return (kb_dir(settings) / inputs_digest(settings.data_dir)).resolve()


def _builds(settings: Settings) -> set[Path]:
    return {p for p in kb_dir(settings).iterdir() if p.is_dir() and not p.is_symlink()}


def test_concurrent_forced_builds_under_a_running_server_keep_its_build_then_sweep_it(tiny_settings: Maker) -> None:
    settings = tiny_settings()
    _done(_kb(settings, "build"))
    with _serving(settings) as (url, served):
        before = _triples(url)
        outputs = [_done(b) for b in [_kb(settings, "build", "--force") for _ in range(2)]]  # side by side
        assert all(out.startswith("built: ") for out in outputs), outputs
        current = _current(settings)
        assert current != served, "a new build is swapped in"
        assert (current / "manifest.json").is_file() and (current / "oxigraph").is_dir(), "a complete build"
        assert served.is_dir() and _triples(url) == before, "the served build is still there and answers"
    _done(_kb(settings, "build", "--force"))  # nobody uses the older builds now: they are swept
    assert _builds(settings) == {_current(settings)}


@pytest.mark.slow
def test_a_build_of_the_older_layout_in_use_is_never_moved(tiny_settings: Maker) -> None:
    settings = tiny_settings()
    _done(_kb(settings, "build"))
    final = kb_dir(settings) / inputs_digest(settings.data_dir)
    folder = final.resolve()
    final.unlink()
    folder.rename(final)  # <hash>/ as a folder, as builds used to be written
    with _serving(settings) as (url, served):
        assert served == final
        refused = _kb(settings, "build", "--force")
        out, _ = refused.communicate(timeout=300)
        assert refused.returncode != 0 and "is in use by another process" in out, out
        assert _triples(url) > 0 and final.is_dir() and not final.is_symlink()
    _done(_kb(settings, "build", "--force"))  # unused now: moved aside, swept, replaced by a link
    assert final.is_symlink() and _builds(settings) == {_current(settings)}
