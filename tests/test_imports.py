"""No import circle in ``src/reluinit``: every ``import`` counts, at the top of a module or inside a
function (a function-level import hides a circle from Python, not from a reader), and a package's
submodule that imports its package's ``__init__`` closes a circle with it."""

import ast
from pathlib import Path

from conftest import ROOT


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """{dotted name: (file, is a package)} of the package at ``root``."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def _known(name: str, modules) -> str | None:
    """``name`` or the nearest of its parents that is a module of the package."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node, module: str, package: bool, modules) -> list[str]:
    if isinstance(node, ast.Import):
        return [_known(a.name, modules) for a in node.names]
    if node.level == 0:
        base = node.module
    else:
        base = module if package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        base = f"{base}.{node.module}" if node.module else base
    # `from . import smoke` imports a submodule; `from .plan import jobs` imports a module's name
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else _known(base, modules) for a in node.names]


def import_graph(root: Path) -> dict[str, set[str]]:
    """{module: the package's modules it imports anywhere in its text}."""
    modules = _modules(root)
    graph = {}
    for name, (path, package) in modules.items():
        nodes = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.Import, ast.ImportFrom))]
        graph[name] = {t for n in nodes for t in _targets(n, name, package, modules) if t and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_of_the_package_imports_itself_through_others():
    graph = import_graph(ROOT / "src" / "reluinit")
    assert len(graph) > 50 and "reluinit.models" in graph["reluinit.pruning"]
    assert circles(graph) == []


def test_the_circle_check_finds_a_function_level_circle_and_a_submodule_importing_its_package(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import g\n")
    (pkg / "b.py").write_text("def g():\n    from . import a  # hidden inside a function\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "sub" / "__init__.py").write_text("from . import d\n")
    (pkg / "sub" / "d.py").write_text("from . import NAME\n")
    assert sorted(circles(import_graph(pkg))) == [["pkg.a", "pkg.b"], ["pkg.sub", "pkg.sub.d"]]
