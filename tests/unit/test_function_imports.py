"""Imports sit at module level; a function-level import of ragbench's own modules is the marked exception.

Issue 38.6: function-level imports remain only where they keep torch, litellm or MLflow out of ``import
ragbench``. Those libraries are imported inside the functions that use them, so no module of ragbench loads
them at import (``test_no_module_imports_a_heavy_library_at_import``). An import of a ragbench module
inside a function (at any depth: under ``if``, ``try``, ``with``) carries ``# deferred: <reason>`` on one of
its lines, the reason being an import cycle (``import cycle <a> -> <b>``) or a command's startup (``startup
of <command>, <seconds> s``); a function-level import of a module the file already imports at module level
is an error (it defers nothing). docs/layout.md lists each marked one under "## Layers" as
``- `file`: `module`, `module` — reason``, and the test checks the list is exactly what ragbench/ does.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import ragbench

ROOT = Path(ragbench.__file__).resolve().parent
LAYOUT = ROOT.parent / "docs" / "layout.md"
HEAVY = frozenset({"torch", "transformers", "sentence_transformers", "litellm", "mlflow"})
MARKER = "# deferred:"
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
ITEM = re.compile(r"^- `(?P<path>[^`]+\.py)`: (?P<modules>`[^`]+`(?:, `[^`]+`)*) — (?P<why>.+)$", re.S)


@functools.cache
def _trees() -> dict[Path, tuple[ast.Module, list[str]]]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        text = p.read_text()
        out[p] = (ast.parse(text, str(p)), text.splitlines())
    return out


@functools.cache
def _modules() -> frozenset[str]:
    names = set()
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return frozenset(names)


def _type_checking(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, *, in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement under ``node`` with whether it runs inside a function; ``if TYPE_CHECKING:``
    blocks are left out (they never run)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child):
            for other in child.orelse:
                yield from _walk_one(other, in_function=in_function)
            continue
        yield from _walk_one(child, in_function=in_function)


def _walk_one(node: ast.AST, *, in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, in_function
    yield from _walk(node, in_function=in_function or isinstance(node, FUNCTIONS))


def imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """(import statement, inside a function) for every import that runs, wherever it is."""
    yield from _walk(tree, in_function=False)


def _package(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1])


def targets(stmt: ast.Import | ast.ImportFrom, package: str, known: frozenset[str]) -> set[str]:
    """The modules a statement loads, by name (``from ragbench.x import y``: ``ragbench.x.y`` when that is a
    module, else ``ragbench.x``); third-party ones by their top-level name."""
    if isinstance(stmt, ast.Import):
        return {a.name if a.name.split(".")[0] == "ragbench" else a.name.split(".")[0] for a in stmt.names}
    base = stmt.module or ""
    if stmt.level:
        parent = package.split(".")[: len(package.split(".")) - stmt.level + 1]
        base = ".".join([*parent, *([base] if base else [])])
    if base.split(".")[0] != "ragbench":
        return {base.split(".")[0]}
    return {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in stmt.names}


def _own(module: str) -> bool:
    return module.split(".")[0] == "ragbench"


def _marked(stmt: ast.stmt, lines: list[str]) -> str | None:
    """The reason of the statement's ``# deferred:`` marker, on any of its lines; None without one."""
    for line in lines[stmt.lineno - 1:stmt.end_lineno]:
        if MARKER in line:
            return line.split(MARKER, 1)[1].strip()
    return None


def scan(tree: ast.Module, lines: list[str], package: str,
         known: frozenset[str]) -> tuple[set[str], dict[str, str | None], list[str]]:
    """(heavy libraries imported at module level, {ragbench module imported in a function: its reason or
    None}, problems: a function-level import of a module the file already imports at module level)."""
    top: set[str] = set()
    inner: list[tuple[ast.Import | ast.ImportFrom, set[str]]] = []
    for stmt, in_function in imports(tree):
        names = targets(stmt, package, known)
        if in_function:
            inner.append((stmt, names))
        else:
            top |= names
    heavy = top & HEAVY
    deferred: dict[str, str | None] = {}
    problems = []
    for stmt, names in inner:
        for name in sorted(n for n in names if _own(n)):
            if name in top:
                problems.append(f"line {stmt.lineno}: {name} is imported at module level already")
            deferred[name] = deferred.get(name) or _marked(stmt, lines)
    return heavy, deferred, problems


def found() -> tuple[dict[str, set[str]], dict[tuple[str, str], str | None], list[str]]:
    """Over ragbench/: {file: heavy libraries at module level}, {(file, module): reason or None}, problems."""
    heavy: dict[str, set[str]] = {}
    deferred: dict[tuple[str, str], str | None] = {}
    problems: list[str] = []
    for path, (tree, lines) in _trees().items():
        name = str(path.relative_to(ROOT.parent))
        h, d, p = scan(tree, lines, _package(path), _modules())
        if h:
            heavy[name] = h
        deferred.update({(name, m): why for m, why in d.items()})
        problems += [f"{name}: {x}" for x in p]
    return heavy, deferred, problems


def listed() -> dict[tuple[str, str], str]:
    """docs/layout.md's list, in its "## Layers" section: (file, module) -> reason."""
    section = LAYOUT.read_text().split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    out: dict[tuple[str, str], str] = {}
    for item in re.split(r"\n(?=- )", section.split("Deferred imports", 1)[-1].strip()):
        m = ITEM.match(" ".join(item.split()))
        if m:
            for module in re.findall(r"`([^`]+)`", m["modules"]):
                out[(m["path"], module)] = " ".join(m["why"].split())
    return out


def test_the_scan_sees_function_level_imports_and_markers() -> None:
    source = (
        "from typing import TYPE_CHECKING\nimport ragbench.a\nfrom ragbench import b\n"
        "if TYPE_CHECKING:\n    import torch\n    from ragbench.c import C\n"
        "try:\n    import litellm\nexcept ImportError:\n    pass\n"
        "def f():\n    import mlflow\n    from ragbench.c import C  # deferred: import cycle x -> c\n"
        "    if C:\n        from ragbench.d import (\n            D,  # deferred: startup of x, 1 s\n        )\n"
        "    from ragbench.e import E\n    from ragbench.a import A\n")
    tree = ast.parse(source)
    known = frozenset({"ragbench", "ragbench.a", "ragbench.b", "ragbench.c", "ragbench.d", "ragbench.e"})
    heavy, deferred, problems = scan(tree, source.splitlines(), "ragbench", known)
    assert heavy == {"litellm"}
    assert deferred == {"ragbench.c": "import cycle x -> c", "ragbench.d": "startup of x, 1 s",
                        "ragbench.e": None, "ragbench.a": None}
    assert problems == ["line 19: ragbench.a is imported at module level already"]


def test_no_module_imports_a_heavy_library_at_import() -> None:
    """torch, transformers, sentence_transformers, litellm and MLflow load inside the functions using them,
    so that ``import ragbench`` (and every module of it) stays light; ``if TYPE_CHECKING:`` is fine."""
    heavy, _, _ = found()
    assert heavy == {}


def test_each_function_level_import_of_ragbench_is_marked() -> None:
    _, deferred, problems = found()
    assert problems == [], "a function-level import of a module the file imports at module level"
    assert sorted(k for k, why in deferred.items() if not why) == [], (
        "import it at module level, or mark it '# deferred: import cycle <a> -> <b>' "
        "(or 'startup of <command>, <s> s') and list it in docs/layout.md")


def test_the_layout_doc_lists_exactly_the_deferred_imports() -> None:
    _, deferred, _ = found()
    docs = listed()
    assert sorted(set(deferred) - set(docs)) == [], "a deferred import docs/layout.md does not list"
    assert sorted(set(docs) - set(deferred)) == [], "docs/layout.md lists a deferred import ragbench no longer has"
