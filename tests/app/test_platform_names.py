"""Outside ``platforms/``, one module names a platform: the registry.

A platform's name appears in code as a string (``"telegram"``), as the attribute of a
config section (``config.platforms.telegram``) or as an import of its package; none of
these may appear in ``src/chatgate`` outside ``platforms/`` and ``app/registry.py``.
Docstrings and comments may mention platforms (they explain, they do not decide).
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from chatgate.app import registry

SRC = Path(__file__).parents[2] / "src" / "chatgate"
ALLOWED = {SRC / "app" / "registry.py"}
PACKAGES = {
    p.name for p in (SRC / "platforms").iterdir() if p.is_dir() and p.name not in ("kit", "__pycache__")
}


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    # attribute docstrings: a bare string right after an assignment
    for node in ast.walk(tree):
        for field in ("body", "orelse"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            for before, after in itertools.pairwise(body):
                assigned = isinstance(before, ast.Assign | ast.AnnAssign)
                if assigned and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                    found.add(id(after.value))
    return found


def _names_in(path: Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if node.value.strip().lower() in names:
                found.append(f"{where}: the string {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr in names:
            if isinstance(node.value, ast.Attribute) and node.value.attr == "platforms":
                found.append(f"{where}: .platforms.{node.attr}")
        elif isinstance(node, ast.ImportFrom | ast.Import):
            modules = (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            )
            for module in modules:
                parts = module.split(".")
                if parts[:2] == ["chatgate", "platforms"] and len(parts) > 2 and parts[2] in PACKAGES:
                    found.append(f"{where}: imports {module}")
    return found


@pytest.mark.xfail(
    strict=True,
    reason="issue 26: `chatgate user` and `chatgate api-key` still read their platform's section in"
    " app/cli/; they move into the web chat's and the API's plugins with the store rework",
)
def test_only_the_registry_names_a_platform_outside_platforms() -> None:
    names = set(registry.names()) | PACKAGES
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path in ALLOWED or (SRC / "platforms") in path.parents:
            continue
        offenders += _names_in(path, names)
    assert offenders == []


def test_the_check_sees_a_platform_named_in_code(tmp_path: Path) -> None:
    """The check itself: each way of naming a platform is caught, a docstring is not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""Telegram, in a docstring, is fine."""\n'
        "import chatgate.platforms.telegram.adapter\n"
        "def f(config):\n"
        '    """A docstring about web."""\n'
        '    return config.platforms.slack, "discord"\n'
    )
    found = sorted(f.split(": ", 1)[1] for f in _names_in(probe, set(registry.names()) | PACKAGES))
    assert found == [
        ".platforms.slack",
        "imports chatgate.platforms.telegram.adapter",
        "the string 'discord'",
    ]
