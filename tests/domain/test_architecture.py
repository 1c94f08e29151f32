"""The architecture as a test: no import cycle among the project's modules, no import of the
simulated world from governed code, and the pure core imports nothing but the standard
library and other pure modules.

Every import counts, also the ones inside functions: a lazy import hides a cycle, it does
not remove it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "access",
    "approvals",
    "capabilities",
    "catalog",
    "fieldops",
    "kernel",
    "operations",
    "runs",
    "sim",
)
# Governed code: everything a production deployment runs whatever world it is plugged into.
GOVERNED = ("access", "approvals", "capabilities", "catalog", "kernel", "operations", "runs")
# Pure modules: standard library (and each other) only.
PURE = (
    "kernel.canonical",
    "kernel.text",
    "runs.domain",
    "catalog.domain",
    "approvals.domain",
    "capabilities.contracts",
    "capabilities.evidence",
    "capabilities.exposure",
)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """Project modules ``module`` imports (module level or not; TYPE_CHECKING blocks too)."""
    out = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import sub`` imports pkg.sub; the package itself only for the names
            # that are not submodules.
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.add(name)
    return out


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    return found


def _in(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_project_has_no_import_cycle():
    assert _cycles() == []


def test_governed_code_never_imports_the_simulated_world():
    leaks = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _in(module, GOVERNED)
        for target in targets
        if _in(target, ("sim",))
    )
    assert leaks == []


def test_the_pure_core_imports_only_pure_modules():
    impure = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if _in(module, PURE)
        for target in targets
        if not _in(target, PURE)
    )
    assert impure == []


def test_the_pure_core_imports_no_third_party_package():
    stdlib = sys.stdlib_module_names
    offenders = []
    for module, path in MODULES.items():
        if not _in(module, PURE):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            offenders += [f"{module}: {t}" for t in tops if t not in stdlib and t not in PACKAGES]
    assert offenders == []


@pytest.mark.parametrize("planted", [("runs.authority", "runs.engine.executor")])
def test_the_cycle_check_finds_a_planted_cycle(planted, monkeypatch):
    """The check can fail: an authority that imported the executor again is a cycle."""
    source, target = planted
    graph = {k: set(v) for k, v in GRAPH.items()}
    graph[source].add(target)
    monkeypatch.setattr(sys.modules[__name__], "GRAPH", graph)
    assert any(source in cycle and target in cycle for cycle in _cycles())
