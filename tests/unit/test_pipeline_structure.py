"""The pipeline reads as its method: a short :class:`~kifqa.pipeline.Pipeline` running the steps in order, short
functions, and no trace state saved to be put back (a second draft is a new attempt)."""

from __future__ import annotations

import ast
from pathlib import Path

import kifqa.pipeline

PIPELINE = Path(kifqa.pipeline.__file__).parent
#: The most lines the class may take, and any function of the package.
MAX_PIPELINE_LINES = 200
MAX_FUNCTION_LINES = 60


def _trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(PIPELINE.glob("*.py"))}


def test_the_pipeline_class_is_short() -> None:
    tree = _trees()[PIPELINE / "__init__.py"]
    [pipeline] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Pipeline"]
    assert pipeline.end_lineno is not None
    assert pipeline.end_lineno - pipeline.lineno + 1 <= MAX_PIPELINE_LINES


def test_no_function_of_the_pipeline_is_long() -> None:
    long = [f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path, tree in _trees().items() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []


def test_the_steps_run_in_the_method_s_order() -> None:
    """``Pipeline._run`` calls draft, entities, relations (ranking, then choice) and answers, in that order."""
    tree = _trees()[PIPELINE / "__init__.py"]
    [run] = [n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef) and n.name == "_run"]
    calls = [f"{n.func.value.id}.{n.func.attr}" for n in ast.walk(run) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
             and n.func.value.id in {"draft", "entities", "relations", "answers"}]
    steps = sorted(calls, key=lambda c: next(n.lineno for n in ast.walk(run) if isinstance(n, ast.Call)
                                             and ast.unparse(n.func) == c))
    assert steps == ["draft.first", "entities.step", "relations.step", "relations.choose", "answers.step"]


def test_no_trace_state_is_saved_to_be_restored() -> None:
    """Nothing in the pipeline snapshots a trace and puts it back: no ``restore``, no copy of ``trace.notes``."""
    source = "\n".join(path.read_text() for path in _trees())
    assert "restore" not in source and "_DraftState" not in source
