"""No import circles in gateway/, counting the imports inside functions too.

A lazy import (one inside a function, kept there for start-up time) is still a
dependency: it only hides a circle from import-linter's contracts, whose graph
keeps module-level imports apart. Imports a type checker alone runs (under
``if TYPE_CHECKING:``) are left out, as the layer contracts leave them out
(pyproject.toml). docs/architecture.md says how the packages are layered.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GATEWAY = Path(__file__).resolve().parents[1] / "gateway"


def module_names(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by its dotted name."""
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def imported(name: str, path: Path) -> set[str]:
    """What the module ``name`` at ``path`` imports, as dotted names (with every
    ``from X import a``'s ``X.a``, which is a module when ``a`` is one)."""
    tree = ast.parse(path.read_text())
    skipped = {id(n) for node in ast.walk(tree) if _type_checking_only(node)
               for part in node.body for n in ast.walk(part)}  # type: ignore[attr-defined]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    names = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports. A module importing its own
    package (``gateway.shadow.run`` runs ``gateway/shadow/__init__.py`` first) is no
    edge: a package's ``__init__`` importing its modules would make every such pair a
    circle that Python never meets."""
    modules = module_names(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for target in imported(name, path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                edges.add(target)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_gateway_has_no_import_circles():
    found = circles(import_graph(GATEWAY))
    assert found == [], "import circles (imports inside functions count): " + "; ".join(
        " <-> ".join(c) for c in found)


@pytest.mark.parametrize("code, expected", [
    # a lazy import closing a circle is found
    ({"a": "import pkg.b\n", "b": "def f():\n    from pkg import a\n"}, [["pkg.a", "pkg.b"]]),
    # a relative one too
    ({"a": "from . import b\n", "b": "def f():\n    from .a import x\n"}, [["pkg.a", "pkg.b"]]),
    # one a type checker alone runs is no dependency
    ({"a": "import pkg.b\n", "b": "from typing import TYPE_CHECKING\n"
      "if TYPE_CHECKING:\n    from pkg.a import x\n"}, []),
])
def test_the_check_finds_a_circle_hidden_in_a_function(tmp_path, code, expected):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in code.items():
        (package / f"{name}.py").write_text(text)
    assert circles(import_graph(package)) == expected
