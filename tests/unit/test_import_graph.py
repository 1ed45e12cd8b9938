"""ragbench's module import graph has no cycle: module-level imports, including those under
``if TYPE_CHECKING:`` and ``try:``, are edges; imports inside functions (deferred on purpose) are not."""

from __future__ import annotations

import ast
from pathlib import Path

import ragbench

ROOT = Path(ragbench.__file__).resolve().parent


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The ragbench module an import name loads (``ragbench.x.y.Name`` -> ``ragbench.x.y``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _imported(body: list[ast.stmt], package: str) -> list[str]:
    names: list[str] = []
    for node in body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            names += [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.If | ast.Try | ast.With):
            names += _imported(node.body, package)
            names += _imported(getattr(node, "orelse", []), package)
            names += _imported(getattr(node, "finalbody", []), package)
            for handler in getattr(node, "handlers", []):
                names += _imported(handler.body, package)
    return names


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = {_resolve(n, known) for n in _imported(ast.parse(path.read_text()).body, package)}
        graph[name] = {d for d in deps if d is not None and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read() -> None:
    graph = import_graph()
    assert "ragbench.components" in graph["ragbench.pipeline"]
    assert "ragbench.components" in graph["ragbench.cases"]
    assert "ragbench.protocols" in graph["ragbench.components"]


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_ragbench_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []
