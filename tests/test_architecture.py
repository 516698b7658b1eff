"""The layout rules of DESIGN.md, checked on the source: no import cycles, no
reaching into another package's private modules, no oversized modules, ``analysis``
and ``traces`` never importing ``replay``, the twin in one package, and test files
named for what they test.

The import graph is read with ``ast``, every import counted: one inside a function
(a lazy import that closes a circle is still a circle) and one under
``if TYPE_CHECKING:`` (a module that names another's types depends on it; a circle
of them cannot be read or replaced one module at a time).
"""

from __future__ import annotations

import ast
import re
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


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


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


def test_type_only_imports_count() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a.b\n")
    assert [alias.name for node in _import_nodes(tree) for alias in node.names] == [
        "TYPE_CHECKING", "a.b"]


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


def test_pure_packages_never_import_replay() -> None:
    """``analysis`` reads results and ``traces`` makes workloads: neither may reach the
    package with the servers and the clock (nor ``traces`` the analysis)."""
    refused = {"analysis": ("replay",), "traces": ("replay", "analysis")}
    found = [
        f"{module} imports {target}"
        for module in MODULES
        for target in imports_of(module)
        if target.split(".")[0] in refused.get(module.split(".")[0], ())
    ]
    assert found == []


_TWIN_WORDS = re.compile(r"twin|calibrat")


def twin_strays(modules: list[str]) -> list[str]:
    """Modules named for the twin or its calibration outside ``replay.twin``. The one
    allowed elsewhere is the CLI's command module (one module per command)."""
    return [
        module for module in modules
        if _TWIN_WORDS.search(module)
        and not (module == "replay.twin" or module.startswith("replay.twin."))
        and not re.fullmatch(r"replay\.cli\._cmd_\w+", module)
    ]


def test_twin_strays_rule() -> None:
    assert twin_strays(["replay.twin._clock", "replay.cli._cmd_calibrate",
                        "analysis.report._plan_view", "analysis.fit._model"]) == []
    assert twin_strays(["analysis.report._twin", "replay.calibrate._x",
                        "replay.load._twin_level"]) == [
        "analysis.report._twin", "replay.calibrate._x", "replay.load._twin_level"]


def test_the_twin_lives_in_one_package() -> None:
    assert twin_strays(sorted(MODULES)) == []


_ROUND_NAMES = re.compile(r"(?:^|_)(?:round|polish|first_hour|review|iteration)(?:_|$)")


def round_named(paths: list[str]) -> list[str]:
    """Test files named after a review round rather than what they test."""
    return [p for p in paths if _ROUND_NAMES.search(Path(p).stem)]


def test_round_named_rule() -> None:
    assert round_named(["tests/test_round_two.py", "tests/x/test_polish.py",
                        "tests/test_first_hour.py", "tests/t/test_round_three_small.py",
                        "tests/test_validity_round_two.py"]) == [
        "tests/test_round_two.py", "tests/x/test_polish.py", "tests/test_first_hour.py",
        "tests/t/test_round_three_small.py", "tests/test_validity_round_two.py"]
    assert round_named(["tests/replay/load/test_timestamps_and_background.py",
                        "tests/replay/ab/test_resume.py"]) == []


def test_test_files_are_named_for_what_they_test() -> None:
    tests = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))
    assert round_named(tests) == []


def test_no_test_module_is_imported() -> None:
    """Helpers shared across test files live in tests/support (or a folder's helper
    module), never in a test module another file imports."""
    found = []
    for path in sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").glob("*.py")]):
        for node in _import_nodes(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names]
            found += [f"{path.relative_to(ROOT)} imports {name}" for name in names
                      if name.startswith("tests.") and
                      name.rpartition(".")[2].startswith("test_")]
    assert found == []
