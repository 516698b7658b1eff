"""The layout rules of DESIGN.md, checked on the source: no import cycles, no
reaching into another package's private modules, no oversized modules.

The import graph is read with ``ast`` (imports inside functions count: a lazy
import that closes a circle is still a circle; ``if TYPE_CHECKING:`` blocks do
not, they never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("traces", "analysis", "replay")
MAX_LINES = 450


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _package_of(module: str) -> str:
    """The package a module belongs to (a package's __init__ belongs to itself)."""
    path = MODULES[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _package_of(module).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str) -> list[str]:
    """Project modules that ``module`` imports (a ``from pkg import submodule`` counts
    as importing the submodule)."""
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    targets: list[str] = []
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = _resolve(module, node)
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        targets.extend(name for name in names if name in MODULES and name != module)
    return sorted(set(targets))


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """One cycle of the graph as a list of modules, or None (iterative DFS)."""
    state: dict[str, int] = {}
    for start in sorted(graph):
        if state.get(start):
            continue
        path: list[str] = []
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(graph[start]))]
        state[start] = 1
        path.append(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(graph.get(child, []))))
    return None


def test_find_cycle_detects_a_circle() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b"], "b": [], "c": ["a", "b"]}) is None


def test_no_import_cycles() -> None:
    graph = {module: imports_of(module) for module in MODULES}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _private_violations() -> list[str]:
    """A module may import the private modules of the packages it sits in, no others."""
    found = []
    for module in MODULES:
        for target in imports_of(module):
            leaf = target.rpartition(".")[2]
            if not leaf.startswith("_") or leaf.startswith("__"):
                continue
            owner = _package_of(target)
            if module != owner and not module.startswith(owner + "."):
                found.append(f"{module} imports {target}")
    return found


def test_packages_import_only_public_names_of_other_packages() -> None:
    assert _private_violations() == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_is_small(module: str) -> None:
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(ROOT)} has {lines} lines"
