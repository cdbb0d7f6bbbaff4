"""Imports flow one way: library -> engine -> connectors -> scenarios, the CLI on top; no module cycles; the library
never imports a connector; no private name is imported across packages."""

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


def _package(path: Path, root: Path) -> str:
    """The package a module belongs to (a package's ``__init__`` belongs to the package itself)."""
    name = _module_name(path, root)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _paths(root: Path, scenarios: bool = False) -> list[Path]:
    return [*root.glob("streamforest/**/*.py"), *root.glob("connectors/**/*.py"),
            *(root.glob("scenarios/**/*.py") if scenarios else [])]


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("engine", "relational", "connectors"):
        return parts[1]
    if module.endswith(("cli", ".demo")) or module in ("streamforest.cli", "streamforest.demo"):
        return "cli"
    return "library"


def _imports(root: Path = ROOT, scenarios: bool = False) -> dict[str, set[str]]:
    """Every module of the package (and of the scenarios) and the modules of both it imports (``from a import b``:
    ``a.b`` if a module), at its top or inside a function alike."""
    paths = _paths(root, scenarios)
    modules = {_module_name(p, root) for p in paths}
    out: dict[str, set[str]] = {}
    for path in paths:
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(("streamforest",
                                                                                            "scenarios")):
                subs = {f"{node.module}.{a.name}" for a in node.names} & modules
                found |= subs or {node.module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith(("streamforest", "scenarios"))}
        out[_module_name(path, root)] = found
    return out


def test_imports_point_down_the_layers():
    wrong = [(m, i) for m, deps in _imports().items() for i in deps
             if LAYERS[_layer(i)] > LAYERS[_layer(m)]]
    assert wrong == []


#: The one module of ``streamforest/`` that may import a connector: the ``streamforest`` command, which registers the
#: connectors' commands and hands the relational CLI the Kafka transport.
COMMAND = "streamforest.cli"


def test_the_library_never_imports_a_connector():
    wrong = [(m, i) for m, deps in _imports().items() if not m.startswith("streamforest.connectors") and m != COMMAND
             for i in deps if i.startswith("streamforest.connectors")]
    assert wrong == []


def private_imports(root: Path = ROOT) -> list[tuple[str, str]]:
    """``(module, name)`` for every private name (``_x``) a module takes from a module of another package: by
    ``from a import _x``, or as ``a._x`` of a module ``a`` it imported."""
    paths = _paths(root, scenarios=True)
    packages = {_module_name(p, root): _package(p, root) for p in paths}
    found = []
    for path in paths:
        name, own = _module_name(path, root), _package(path, root)
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}  # local name -> the package module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    target = f"{node.module}.{a.name}"
                    if target in packages:
                        aliases[a.asname or a.name] = target
                    elif a.name.startswith("_") and not a.name.startswith("__") \
                            and packages.get(node.module, own) != own:
                        found.append((name, target))
            elif isinstance(node, ast.Import):
                aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in packages})
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                module = aliases[node.value.id]
                if packages[module] != own:
                    found.append((name, f"{module}.{node.attr}"))
    return found


def test_no_private_name_is_imported_across_packages():
    assert private_imports() == []


def cycles(root: Path = ROOT) -> list[list[str]]:
    """Import cycles between the package's modules."""
    graph = _imports(root, scenarios=True)
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
