"""The package layout holds: no import circle among kifqa's modules, imports run down the layers (at most
one runs up), Ray is imported only inside kifqa/batch, evaluating or reading a run folder imports no Ray, and settings
change only through ``Settings.override`` (no ``model_copy(update=`` outside kifqa/config.py).

Imports are read from the source (``ast``), including those inside functions, except those under
``if TYPE_CHECKING:`` (they never run).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import kifqa

ROOT = Path(kifqa.__file__).parent

#: kifqa's packages and top-level modules from the bottom layer up; a module may import its own layer and
#: those below it. The package root (``kifqa/__init__.py``, the public API) may import anything.
LAYERS = (
    {"errors", "types", "config", "sqlite", "resilience", "lazy", "redact", "bounded"},
    {"data"},
    {"kb", "llm"},
    {"examples"},
    {"pipeline"},
    {"api", "runs"},
    {"batch"},
    {"eval", "report"},
    {"cli", "bench"},
)
#: Imports that run up a layer, allowed as exceptions (at most one), as (importing module, imported module).
UPWARD: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from (n for child in node.orelse for n in _imports(child))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def _package(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def imported(module: str) -> set[str]:
    """The names of the external packages and kifqa modules ``module`` imports (a ``from package import
    name`` of a submodule counts as that submodule)."""
    path = MODULES[module]
    names: set[str] = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:  # relative: from the importing module's package up
            package = _package(module, path).split(".")
            base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
        for alias in node.names:
            names.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return names


GRAPH = {m: {n for n in imported(m) if n in MODULES and n != m} for m in MODULES}


def layer(module: str) -> int | None:
    top = module.split(".")[1] if "." in module else None
    return next((i for i, names in enumerate(LAYERS) if top in names), None)


def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if m != "kifqa" and layer(m) is None] == []


def test_no_import_circle() -> None:
    circles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(GRAPH[m]):
            if state.get(n) == 1:
                circles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in MODULES:
        if m not in state:
            visit(m)
    assert circles == []


def test_imports_run_down_the_layers() -> None:
    upward = {(m, n) for m, targets in GRAPH.items() if m != "kifqa"
              for n in targets if layer(n) is not None and layer(n) > layer(m)}  # type: ignore[operator]  # layer(n) is not None here
    assert upward == UPWARD and len(UPWARD) <= 1


def test_ray_only_in_batch() -> None:
    users = {m for m in MODULES if any(n == "ray" or n.startswith("ray.") for n in imported(m))}
    assert users and all(m.startswith("kifqa.batch") for m in users), sorted(users)



def test_settings_change_only_through_config() -> None:
    """Every change of settings goes through the validated ``Settings.override``."""
    assert [m for m, path in MODULES.items() if m != "kifqa.config" and "model_copy(update=" in path.read_text()] == []


def test_evaluation_and_reading_a_run_import_no_ray(tmp_path: Path) -> None:
    """In a fresh interpreter: import the evaluation, write a run folder and read it back, score it."""
    script = f"""
import sys
import kifqa.eval.sources, kifqa.eval.report, kifqa.eval.silver, kifqa.eval.compare
from kifqa.eval.sources import evaluate_run
from kifqa.runs import RunFolder, read_run
from kifqa.types import Question, Result, Trace
import pyarrow as pa
from kifqa.runs import ANSWER_SCHEMA, TRACE_SCHEMA

run = RunFolder({str(tmp_path)!r})
run.create()
result = Result(Question("q1", "who?"), [], Trace("q1", "who?", error="none", error_step="draft"))
run.write_shard(0, pa.Table.from_pylist(result.answer_rows(), schema=ANSWER_SCHEMA),
                pa.Table.from_pylist([result.trace.to_row()], schema=TRACE_SCHEMA))
run.write_manifest({{"corpus": {{"path": {str(tmp_path / "corpus.jsonl")!r}}}, "config": {{"batch": {{}}}}}})
(run.root / "corpus.jsonl").write_text('{{"id": "q1", "question": "who?"}}\\n')
assert list(read_run(run.root)) == ["q1"]
assert evaluate_run(run.root, [], None).run.run_questions == 1  # reads the corpus the manifest names
assert "ray" not in sys.modules, "ray was imported"
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
