"""Only entry points end the process: library code raises, and a ``__main__`` module (or a module's
``if __name__ == "__main__":`` block) maps the error to an exit code. ``sys.exit``, ``os._exit``,
``exit``/``quit`` and ``raise SystemExit`` anywhere else are listed with file:line."""

from __future__ import annotations

import ast
from pathlib import Path

import ragbench

ROOT = Path(ragbench.__file__).resolve().parent

# Modules that may still exit from library code while a redesign removes their exits; each leaves when its
# exits go (test_known_modules_still_exit). Empty since the job's life raises (ragbench.job).
KNOWN: frozenset[str] = frozenset()


def _is_main_guard(stmt: ast.stmt) -> bool:
    """``if __name__ == "__main__":``."""
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    sides = [stmt.test.left, *stmt.test.comparators]
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def _exits(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            return f.id in {"exit", "quit", "_exit"}
        return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                and (f.value.id, f.attr) in {("sys", "exit"), ("os", "_exit")})
    if isinstance(node, ast.Raise) and node.exc is not None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "SystemExit"
    return False


def exit_calls(source: str, *, entry_point: bool) -> list[int]:
    """The lines that end the process outside an entry point (none in a ``__main__`` module)."""
    if entry_point:
        return []
    tree = ast.parse(source)
    guarded = {id(n) for stmt in tree.body if _is_main_guard(stmt) for n in ast.walk(stmt)}
    return sorted(n.lineno for n in ast.walk(tree) if _exits(n) and id(n) not in guarded)


def found() -> dict[str, list[int]]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        lines = exit_calls(path.read_text(), entry_point=path.name == "__main__.py")
        if lines:
            out[str(path.relative_to(ROOT.parent))] = lines
    return out


def test_exit_calls_are_found() -> None:
    source = '''
import os
import sys


def run():
    if bad:
        sys.exit(1)
    os._exit(3)
    raise SystemExit(2)


def fine():
    raise ValueError("x")


if __name__ == "__main__":
    sys.exit(run())
'''
    assert exit_calls(source, entry_point=False) == [8, 9, 10]
    assert exit_calls(source, entry_point=True) == []
    assert exit_calls("def f():\n    exit(0)\n", entry_point=False) == [2]


def test_only_entry_points_exit() -> None:
    offending = {path: lines for path, lines in found().items() if path not in KNOWN}
    assert not offending, "\n".join(f"{p}:{n}: ends the process outside an entry point; raise instead"
                                    for p, lines in offending.items() for n in lines)


def test_known_modules_still_exit() -> None:
    """A module whose exits are gone leaves KNOWN, so the exemption cannot outlive them."""
    assert sorted(KNOWN - set(found())) == []
