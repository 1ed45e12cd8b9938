"""docs/layout.md's list of process-wide state is exactly what ragbench/ holds; run state is the session's.

Process-wide state is found in the source (``ast``):
- a module-level name bound to a stateful object: a lock, a ``ContextVar``, a weak map, an empty ``set()``
  / ``dict()`` / ``list()``, a terminal ``Console``, a URL opener, or an instance of a ragbench class that
  keeps state (a method assigns ``self.x``, or a dataclass that is not frozen);
- a module-level dict, list or set literal that a function changes in place (``NAME[k] = v``,
  ``NAME.pop(k)``, ``del NAME[k]``; filling a table while the module is imported does not count);
- a name a function rebinds with ``global``;
- a function or method memoised with ``functools.cache`` / ``lru_cache``, listed as ``name()``.
Each is listed under "## Process-wide state" in docs/layout.md as ``- `file`: `name` — reason``.
"""

from __future__ import annotations

import ast
import atexit
import functools
import re
import sys
from pathlib import Path

import pytest

import ragbench
from ragbench import interrupts, session
from ragbench.budget import Budget

ROOT = Path(ragbench.__file__).resolve().parent
LAYOUT = ROOT.parent / "docs" / "layout.md"
ITEM = re.compile(r"^- `(?P<path>[^`]+\.py)`: `(?P<name>[^`]+)` — (?P<why>.+)$", re.S)
STATEFUL_CALLS = frozenset({
    "Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore", "Event", "ContextVar", "WeakKeyDictionary",
    "WeakValueDictionary", "WeakSet", "set", "dict", "list", "defaultdict", "Counter", "OrderedDict", "deque",
    "Queue", "Console", "build_opener"})
MUTATORS = frozenset({"pop", "popitem", "clear", "update", "setdefault", "append", "extend", "remove", "add",
                      "discard", "insert", "appendleft", "popleft"})
CONTAINERS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _frozen_dataclass(cls: ast.ClassDef) -> bool | None:
    """True: a frozen dataclass; False: a dataclass that is not; None: no dataclass."""
    for d in cls.decorator_list:
        call = d if isinstance(d, ast.Call) else None
        name = _callee(call) if call else (d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", ""))
        if name == "dataclass":
            return bool(call and any(k.arg == "frozen" and getattr(k.value, "value", False)
                                     for k in call.keywords))
    return None


def stateful_classes(trees: dict[Path, ast.AST]) -> set[str]:
    """The ragbench classes whose instances keep state (see the module docstring)."""
    out: set[str] = set()
    for tree in trees.values():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            frozen = _frozen_dataclass(cls)
            assigns = any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                          and isinstance(n.value, ast.Name) and n.value.id == "self" for n in ast.walk(cls))
            if frozen is False or (frozen is None and assigns):
                out.add(cls.name)
    return out


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's own statements, into ``if``/``try``/``with`` blocks but not functions or classes."""
    out: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        stmt = todo.pop(0)
        out.append(stmt)
        if isinstance(stmt, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(stmt, block, []))
        elif isinstance(stmt, ast.ExceptHandler):
            todo.extend(stmt.body)
    return out


def _changed_in_functions(tree: ast.Module) -> set[str]:
    """Names a function of the module changes in place or rebinds with ``global``."""
    out: set[str] = set()
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
        for n in ast.walk(fn):
            if isinstance(n, ast.Global):
                out.update(n.names)
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store | ast.Del):
                if isinstance(n.value, ast.Name):
                    out.add(n.value.id)
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MUTATORS
                  and isinstance(n.func.value, ast.Name)):
                out.add(n.func.value.id)
    return out


def _memoised(tree: ast.Module) -> set[str]:
    out: set[str] = set()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                for d in child.decorator_list:
                    text = ast.unparse(d)
                    if re.search(r"\b(lru_cache|cache)\b", text) and "cached_property" not in text:
                        out.add(f"{prefix}{child.name}()")
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return out


def state_in(tree: ast.Module, stateful: set[str]) -> set[str]:
    """The process-wide state of one module (see the module docstring)."""
    changed = _changed_in_functions(tree)
    found = {name for n in ast.walk(tree) if isinstance(n, ast.Global) for name in n.names}
    for stmt in _top_level(tree):
        if isinstance(stmt, ast.Assign):
            value, targets = stmt.value, stmt.targets
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            value, targets = stmt.value, [stmt.target]
        else:
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if isinstance(value, ast.Call) and (_callee(value) in STATEFUL_CALLS or _callee(value) in stateful):
            found.update(names)
        elif isinstance(value, CONTAINERS):
            found.update(n for n in names if n in changed)
    return found | _memoised(tree)


@functools.cache
def _trees() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(ROOT.rglob("*.py"))}


def process_state() -> set[tuple[str, str]]:
    """(file, name) for every process-wide state in ragbench/."""
    trees = _trees()
    stateful = stateful_classes(trees)  # type: ignore[arg-type]
    return {(str(p.relative_to(ROOT.parent)), name)
            for p, t in trees.items() for name in state_in(t, stateful)}


def listed() -> dict[tuple[str, str], str]:
    """docs/layout.md's list: (file, name) -> reason."""
    section = LAYOUT.read_text().split("\n## Process-wide state\n", 1)[1].split("\n## ", 1)[0]
    out: dict[tuple[str, str], str] = {}
    for item in re.split(r"\n(?=- )", section.strip()):
        m = ITEM.match(item)
        if m:
            out[(m["path"], m["name"])] = " ".join(m["why"].split())
    return out


def test_the_scan_finds_each_kind_of_state() -> None:
    source = (
        "import threading, functools\nfrom contextvars import ContextVar\n"
        "_lock = threading.Lock()\n_var = ContextVar('v', default=None)\n_seen = set()\n"
        "TABLE = {'a': 1}\nTABLE['b'] = 2\n_OPEN = {}\nNAMES = ['x']\n_mod = None\n"
        "LEDGER = Ledger()\nFROZEN = Point()\nVIEW = View()\n"
        "def f(k):\n    global _mod\n    _mod = k\n    _OPEN[k] = 1\n    NAMES.append(k)\n"
        "@functools.lru_cache(maxsize=1)\ndef g():\n    return 1\n"
        "class C:\n    @functools.cache\n    def h(self):\n        return 2\n")
    stateful = stateful_classes({Path("x.py"): ast.parse(
        "class Ledger:\n    def __init__(self):\n        self.n = 0\n"
        "@dataclass(frozen=True)\nclass Point:\n    x: int = 0\n"
        "class View:\n    __slots__ = ()\n    def get(self):\n        return 1\n")})
    assert stateful == {"Ledger"}
    assert state_in(ast.parse(source), stateful) == {
        "_lock", "_var", "_seen", "_OPEN", "NAMES", "_mod", "LEDGER", "g()", "C.h()"}


def test_each_process_wide_state_is_listed_with_its_reason_in_the_layout_doc() -> None:
    """Issue 38.5: about 34 process-wide states, none listed; the ledger, the sweep's parents, the loaded
    models and the signal flag were module globals."""
    documented, found = listed(), process_state()
    assert documented, "docs/layout.md has no '## Process-wide state' list"
    assert sorted(found - set(documented)) == [], ("process-wide state docs/layout.md does not list (add "
                                                   "it, with its reason, or make it the session's)")
    assert sorted(set(documented) - found) == [], "docs/layout.md lists state ragbench no longer holds"
    assert [k for k, why in documented.items() if len(why) < 20] == [], "each state needs its reason"


def test_the_run_state_is_the_sessions() -> None:
    """The ledger, the sweep's parents, the caches and the signal flag are not module globals: a new
    session starts with none of the last one's."""
    found = process_state()
    for path, name in [("ragbench/budget.py", "LEDGER"), ("ragbench/sweep.py", "_PARENTS"),
                       ("ragbench/sweep.py", "_OPEN"), ("ragbench/interrupts.py", "_requested"),
                       ("ragbench/embed/sentence_transformer.py", "_LAST_MODEL"),
                       ("ragbench/llm/local/engine.py", "_models"), ("ragbench/reuse.py", "LAST"),
                       ("ragbench/tracking/mlflow_tracker.py", "client_for()")]:
        assert (path, name) not in found
    first = session.begin()
    try:
        first.ledger.start_job(Budget(max_calls=0, scope="job"))
        with pytest.raises(Exception, match="max_calls"):
            session.LEDGER.admit()  # the call sites' LEDGER is the current session's
        first.signals.requested = 15
        with pytest.raises(interrupts.Interrupted):
            interrupts.check()
        first.caches.slot("test", list[int]).append(1)
        second = session.begin()
        assert session.current() is second and second is not first
        session.LEDGER.admit()  # a fresh ledger: no budget, nothing stopped
        interrupts.check()  # no signal in this session
        assert second.caches.slot("test", list[int]) == []
    finally:
        session.begin()


class _Tracker:
    def __init__(self) -> None:
        self.ended: list[tuple[str, str]] = []

    def end_run(self, run_id: str, status: str) -> None:
        self.ended.append((run_id, status))


def test_the_sessions_parents_are_closed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parents, tracker = session.Parents(), _Tracker()
    handlers: list[object] = []
    monkeypatch.setattr(atexit, "register", lambda fn, *a: handlers.append((fn, a)))
    parents.opened("/sweeps/a", "p1", tracker)
    parents.opened("/sweeps/b", "p2", tracker)
    monkeypatch.undo()
    assert handlers == [(parents.close_all, ("FAILED",))]  # one exit handler, at the first parent
    assert parents.run_id("/sweeps/a") == "p1" and parents.owns("p2") and not parents.owns("p3")
    parents.closing("p1")  # its sweep ends it
    parents.close_all("KILLED")
    parents.close_all("FAILED")
    assert tracker.ended == [("p2", "KILLED")]


@pytest.mark.parametrize("module", ["ragbench.sweep", "ragbench.session", "ragbench.interrupts"])
def test_importing_registers_no_exit_handler(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38.5: ``ragbench/sweep.py`` registered ``atexit.register(close_open_parents, "FAILED")`` when
    imported. The module is imported afresh with ``atexit.register`` watched, then put back; a library it
    imports for the first time may register its own (filelock does)."""
    import importlib

    package, _, name = module.rpartition(".")
    old = importlib.import_module(module)
    registered: list[object] = []
    try:
        del sys.modules[module]
        monkeypatch.setattr(atexit, "register", lambda fn, *a, **k: registered.append(fn))
        importlib.import_module(module)
    finally:
        monkeypatch.undo()
        sys.modules[module] = old  # the module every other one imported, as the package's attribute too
        setattr(sys.modules[package], name, old)
    assert [fn for fn in registered if str(getattr(fn, "__module__", "")).startswith("ragbench")] == []
