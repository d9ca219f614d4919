"""Packaging: every third-party import of the shipped code is declared (core or an extra), and the
backends' packages are bounded to the versions tested."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
#: Modules of packages this environment may lack (the vllm extra runs on GPU nodes only).
NOT_INSTALLED = {"vllm": "vllm"}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(requirement).name).lower()


def _declared() -> dict[str, Requirement]:
    requirements = list(PROJECT["dependencies"]) + [r for extra in PROJECT["optional-dependencies"].values()
                                                    for r in extra]
    return {_name(r): Requirement(r) for r in requirements}


def _imports() -> dict[str, set[str]]:
    """Top-level modules the shipped code imports, and the files that import each."""
    found: dict[str, set[str]] = {}
    for path in (REPO / "kifqa").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "kifqa":
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_import_of_the_shipped_code_is_declared() -> None:
    declared = _declared()
    by_module = importlib.metadata.packages_distributions()
    undeclared = {}
    for module, files in _imports().items():
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in by_module.get(module, [NOT_INSTALLED.get(module, module)])}
        if not dists & declared.keys():
            undeclared[module] = sorted(files)
    assert undeclared == {}


def test_the_browser_is_an_extra_not_a_core_dependency() -> None:
    core = {_name(r) for r in PROJECT["dependencies"]}
    assert "playwright" not in core and "playwright" in {_name(r) for r in PROJECT["optional-dependencies"]["browser"]}


def test_vllm_is_bounded_and_xllamacpp_has_a_calendar_floor_that_the_installed_one_meets() -> None:
    declared = _declared()
    vllm = declared["vllm"].specifier
    assert Version("0.11.0") in vllm and Version("0.33.9") in vllm
    assert Version("0.10.2") not in vllm and Version("0.34.0") not in vllm  # 0.10.2: no StructuredOutputsParams
    xllamacpp = declared["xllamacpp"].specifier
    [floor] = [s for s in xllamacpp if s.operator == ">="]
    assert Version(floor.version).major >= 2025, "xllamacpp uses calendar versions"
    assert Version(importlib.metadata.version("xllamacpp")) in SpecifierSet(str(xllamacpp))
