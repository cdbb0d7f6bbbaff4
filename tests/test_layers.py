"""Imports flow one way: library -> engine -> connectors -> scenarios, the CLI on top; no module cycles."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Layer of each top package, lowest first; a module may import only from its own layer or lower ones.
LAYERS = {"library": 0, "engine": 1, "relational": 2, "connectors": 2, "cli": 3}


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "connectors":
        parts = ["streamforest", *parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("engine", "relational", "connectors"):
        return parts[1]
    if module.endswith(("cli", ".demo")) or module in ("streamforest.cli", "streamforest.demo"):
        return "cli"
    return "library"


def _imports(root: Path = ROOT) -> dict[str, set[str]]:
    """Every module of the package and the package modules it imports (``from a import b``: ``a.b`` if a module)."""
    paths = [*root.glob("streamforest/**/*.py"), *root.glob("connectors/**/*.py")]
    modules = {_module_name(p, root) for p in paths}
    out: dict[str, set[str]] = {}
    for path in paths:
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("streamforest"):
                subs = {f"{node.module}.{a.name}" for a in node.names} & modules
                found |= subs or {node.module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("streamforest")}
        out[_module_name(path, root)] = found
    return out


def test_imports_point_down_the_layers():
    wrong = [(m, i) for m, deps in _imports().items() for i in deps
             if LAYERS[_layer(i)] > LAYERS[_layer(m)]]
    assert wrong == []


def cycles(root: Path = ROOT) -> list[list[str]]:
    """Import cycles between the package's modules."""
    graph = _imports(root)
    modules = set(graph)
    graph = {m: {d for d in deps if d in modules and d != m} for m, deps in graph.items()}
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                found.append([*path[path.index(d):], d] if d in path else [m, d])
            elif d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return found


def test_no_import_cycles_between_modules():
    assert cycles() == []
