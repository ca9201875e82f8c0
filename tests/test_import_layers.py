"""Imports go one way: ``streamjoin`` ← ``resources`` ← ``assets`` / ``checks`` / ``jobs`` ← ``dagster_project``.

Every ``import`` statement of the project's packages is read (also the ones inside functions), so a
new upward or sideways import fails here before it tangles the layers (docs/architecture.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from streamjoin.config import PROJECT_ROOT

#: Package → what it may import among the project's packages (besides itself).
ALLOWED = {
    "streamjoin": set(),
    "resources": {"streamjoin"},
    "assets": {"streamjoin", "resources"},
    "checks": {"streamjoin", "resources"},
    "jobs": {"streamjoin", "resources"},
    "dagster_project": {"streamjoin", "resources", "assets", "checks", "jobs"},
}

#: Inside the engine: what a folder must not import (operators know nothing of SQL; the
#: changelog vocabulary and the errors stand below everything).
ENGINE_FORBIDDEN = {
    "streamjoin.runtime": {"streamjoin.planner", "streamjoin.sink", "streamjoin.connectors", "streamjoin.testing"},
    "streamjoin.sink": {"streamjoin.planner", "streamjoin.testing"},
    "streamjoin.connectors": {"streamjoin.planner", "streamjoin.runtime", "streamjoin.sink", "streamjoin.testing"},
    "streamjoin.changelog": {"streamjoin.planner", "streamjoin.runtime", "streamjoin.sink", "streamjoin.connectors"},
    "streamjoin.checkpoint": {"streamjoin.planner", "streamjoin.runtime", "streamjoin.sink", "streamjoin.connectors"},
    "streamjoin.contract": {"streamjoin.planner", "streamjoin.runtime", "streamjoin.sink", "streamjoin.connectors"},
    "streamjoin.errors": {"streamjoin"},
}

#: Orchestration and validation libraries the engine must not depend on.
ENGINE_FORBIDDEN_LIBRARIES = {"dagster", "great_expectations"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str | None = None) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in ``path`` (the module ``module``, by default its own)."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            found.append((node.lineno, name))
    return found


def _files(package: str) -> list[Path]:
    return sorted((PROJECT_ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_upward_or_sideways_import(package):
    assert _files(package), f"no Python files in {package}/"
    wrong = []
    for path in _files(package):
        for line, name in _imports(path):
            top = name.split(".")[0]
            if top in ALLOWED and top != package and top not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(PROJECT_ROOT)}:{line} imports {name}")
            if package == "streamjoin" and top in ENGINE_FORBIDDEN_LIBRARIES:
                wrong.append(f"{path.relative_to(PROJECT_ROOT)}:{line} imports {name} (the engine is plain PySpark)")
    assert not wrong, "\n".join(wrong)


def test_engine_layers():
    wrong = []
    for path in _files("streamjoin"):
        module = _module_name(path)
        for owner, forbidden in ENGINE_FORBIDDEN.items():
            if module != owner and not module.startswith(owner + "."):
                continue
            for line, name in _imports(path):
                if any(name == f or name.startswith(f + ".") for f in forbidden) and not name.startswith(owner):
                    wrong.append(f"{path.relative_to(PROJECT_ROOT)}:{line} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_the_walk_sees_relative_and_nested_imports(tmp_path):
    """The checker itself: a relative import and one inside a function are both found."""
    probe = tmp_path / "probe.py"
    probe.write_text("from ..planner import script\n\ndef f():\n    import dagster\n")
    assert _imports(probe, "streamjoin.runtime.probe") == [(1, "streamjoin.planner"), (4, "dagster")]
