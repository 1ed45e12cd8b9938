"""ragbench's package graph is layered: no import cycle between its packages.

Every import counts: module level, under ``if TYPE_CHECKING:`` or ``try:``, and inside functions (a
deferred import hides a cycle, it does not remove it). A node is a subpackage of ragbench
(``ragbench.judge`` holds every module under ``ragbench/judge/``), a top-level module (``ragbench.app``)
or the root ``ragbench`` (``ragbench/__init__.py``, which everything may import for ``__version__``,
so it imports nothing of ragbench but leaf modules). A ``__main__`` module is an entry point: it is its
own node, may import anything, and nothing imports it. The layers are listed in docs/layout.md, and
``test_every_import_follows_the_documented_layers`` reads that list and checks the graph against it.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ragbench

ROOT = Path(ragbench.__file__).resolve().parent

# Module imports exempted while the record redesign is under way, each named exactly (importing module,
# imported module). Each must still be needed (test_each_known_edge_is_needed): when its import goes or
# stops closing a cycle, remove it here. Nothing else may be added.
KNOWN: frozenset[tuple[str, str]] = frozenset()  # no exemption left: the record redesign cut the last three


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` module imports ``target`` module at ``path:line``."""

    source: str
    target: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT.parent)}:{self.line}: {self.source} -> {self.target}"


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def node(module: str) -> str:
    """The package-graph node of a ragbench module (see the module docstring)."""
    parts = module.split(".")
    if parts[-1] == "__main__" or len(parts) < 2:
        return module
    return ".".join(parts[:2]) if (ROOT / parts[1]).is_dir() else module


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The ragbench module an import name loads (``ragbench.x.y.Name`` -> ``ragbench.x.y``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _imports(tree: ast.AST, package: str) -> Iterator[tuple[str, int]]:
    """Every imported name with its line, wherever the import statement is."""
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                yield alias.name, stmt.lineno
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                parent = package.split(".")[: len(package.split(".")) - stmt.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            for alias in stmt.names:
                yield f"{base}.{alias.name}", stmt.lineno


@functools.lru_cache(maxsize=1)  # one parse of the package for every test here
def module_edges() -> tuple[Edge, ...]:
    known = modules()
    edges: list[Edge] = []
    for name, path in sorted(known.items()):
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for imported, line in _imports(ast.parse(path.read_text()), package):
            target = _resolve(imported, known)
            if target is not None and target != name:
                edges.append(Edge(name, target, path, line))
    return tuple(edges)


def import_graph() -> dict[str, set[str]]:
    """The module graph (every import, at any depth)."""
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for edge in module_edges():
        graph[edge.source].add(edge.target)
    return graph


def package_graph(known: frozenset[tuple[str, str]] = frozenset()) -> dict[str, set[str]]:
    """The package graph, less the module imports in ``known``."""
    graph: dict[str, set[str]] = {node(name): set() for name in modules()}
    for edge in module_edges():
        pair = (node(edge.source), node(edge.target))
        if pair[0] != pair[1] and (edge.source, edge.target) not in known:
            graph[pair[0]].add(pair[1])
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
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


def layers(graph: dict[str, set[str]]) -> list[list[str]]:
    """Nodes by layer for an acyclic graph: layer 0 imports nothing, layer n imports only below n."""
    depth: dict[str, int] = {}

    def level(v: str) -> int:
        if v not in depth:
            depth[v] = 1 + max((level(w) for w in graph[v]), default=-1)
        return depth[v]

    out: list[list[str]] = []
    for v in sorted(graph):
        while len(out) <= level(v):
            out.append([])
        out[level(v)].append(v)
    return out


def test_the_graph_is_read() -> None:
    graph = import_graph()
    assert "ragbench.components" in graph["ragbench.pipeline"]
    assert "ragbench.components" in graph["ragbench.cases"]
    assert "ragbench.protocols" in graph["ragbench.components"]
    # a function-level import is an edge: plan.cli imports redact inside make_plan()
    assert "ragbench.redact" in graph["ragbench.plan.cli"]


def test_nodes() -> None:
    assert node("ragbench") == "ragbench"
    assert node("ragbench.app") == "ragbench.app"
    assert node("ragbench.judge.aggregate") == "ragbench.judge"
    assert node("ragbench.judge") == "ragbench.judge"
    assert node("ragbench.judge.__main__") == "ragbench.judge.__main__"
    assert node("ragbench.datasets.evalgen.cli") == "ragbench.datasets"


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert layers({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == [["b"], ["a"], ["c"]]


def test_ragbench_has_no_package_cycle() -> None:
    found = cycles(package_graph(KNOWN))
    offending = sorted({str(e) for e in module_edges() if (e.source, e.target) not in KNOWN
                        and node(e.source) != node(e.target)
                        and any(node(e.source) in c and node(e.target) in c for c in found)})
    assert not found, f"package import cycles {found}, through:\n" + "\n".join(offending)


def test_nothing_imports_an_entry_point() -> None:
    offending = [str(e) for e in module_edges()
                 if e.target.endswith(".__main__") and (e.source, e.target) not in KNOWN]
    assert not offending, "an entry point is imported:\n" + "\n".join(offending)


def test_the_root_imports_no_subpackage() -> None:
    """``import ragbench`` (for ``__version__``) loads no subpackage, even through a module: everything
    imports the root."""
    graph = package_graph()
    reached, todo = set(), ["ragbench"]
    while todo:
        for target in graph[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    assert sorted(t for t in reached if (ROOT / t.split(".")[1]).is_dir()) == []


def test_each_known_edge_is_needed() -> None:
    """Each KNOWN import still exists and, without its exemption, imports an entry point or closes a cycle."""
    graph = import_graph()
    assert [pair for pair in sorted(KNOWN) if pair[1] not in graph.get(pair[0], ())] == []
    unneeded = [pair for pair in sorted(KNOWN) if not pair[1].endswith(".__main__")
                and not any({node(pair[0]), node(pair[1])} <= {*c} for c in cycles(package_graph(KNOWN - {pair})))]
    assert unneeded == []


LAYOUT = ROOT.parent / "docs" / "layout.md"


def documented_order() -> dict[str, int]:
    """docs/layout.md's "## Layers" list: each node's position, bottom up (layer by layer, each layer's
    entries in their order: an entry may import the entries before it). ``__main__`` nodes come last."""
    section = LAYOUT.read_text().split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    known = package_graph()
    order: dict[str, int] = {}
    for body in re.findall(r"^\d\. (.*?)(?=^\d\. |\Z)", section, re.S | re.M):
        for token in re.findall(r"`([^`]+)`", body.split("\n\n")[0]):
            name = token if token.startswith("ragbench") else f"ragbench.{token}"
            if name in known:
                order.setdefault(name, len(order))
    for name in sorted(known):
        if name.endswith(".__main__"):
            order.setdefault(name, len(order))
    return order


def test_the_documented_layers_are_read() -> None:
    order = documented_order()
    assert order["ragbench.errors"] == 0
    assert order["ragbench.protocols"] < order["ragbench.retrieval"] < order["ragbench.pipeline"]
    assert order["ragbench.record"] < order["ragbench.tracking"] < order["ragbench.job"] < order["ragbench.__main__"]


def test_every_import_follows_the_documented_layers() -> None:
    """Issue 38.6: the layer order docs/layout.md states is the package graph's (before, it listed ``stages``
    after ``build`` and ``plan`` after ``app``, which import them, and left ``conf`` out)."""
    order, graph = documented_order(), package_graph(KNOWN)
    assert sorted(set(graph) - set(order)) == [], "nodes docs/layout.md's layers do not list"
    against = sorted(f"{source} -> {target}" for source, targets in graph.items() for target in targets
                     if order[target] >= order[source])
    assert against == [], "imports against docs/layout.md's layer order (an entry imports a later one)"
