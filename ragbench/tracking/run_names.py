"""A sweep job's run name: what varies in the sweep first (``topk=5 dataset=qasper #3``), readable when cut."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

SWEEP_KEYS_FILE = "ragbench_sweep_keys"  # beside the parent-id file: the keys the sweep's command line varies
WHERE_KEYS = ("cache.", "tracking.", "hydra.", "resume", "objective")  # where results go, not what was run
_NUMBER = re.compile(r"^#\d+$")


def split_overrides(text: str, sep: str = ",") -> list[str]:
    """Overrides split at top-level ``sep`` (``reranker=[a,b]`` stays whole)."""
    out: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return [o for o in out if o]


def _key(item: str) -> str:
    return item.partition("=")[0].lstrip("+~")


def swept_keys(overrides: Iterable[str]) -> list[str]:
    """The keys of the sweep overrides (``retrieval.topk=3,5``, ``range(..)``, ``choice(..)``), in command-line
    order; the grammar is Hydra's own."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides([str(o) for o in overrides])
    except Exception:  # noqa: BLE001 - Hydra rejects a bad override itself, with its own message
        return []
    return [o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()]


def write_sweep_keys(sweep_dir: Path, overrides: Iterable[str]) -> list[str]:
    """Records the swept keys in the sweep folder, for jobs run in other processes (launchers)."""
    keys = swept_keys(overrides)
    (sweep_dir / SWEEP_KEYS_FILE).write_text("\n".join(keys) + "\n", encoding="utf-8")
    return keys


def read_sweep_keys(sweep_dir: str | Path) -> list[str]:
    p = Path(sweep_dir) / SWEEP_KEYS_FILE
    try:
        return [k for k in p.read_text(encoding="utf-8").splitlines() if k]
    except OSError:
        return []


def short_items(items: Sequence[str]) -> list[str]:
    """``retrieval.topk=5`` as ``topk=5`` where no other item of the job has that last key segment; the keys
    that say where results go (``cache.dir``) stay whole."""
    last = [_key(i).rsplit(".", 1)[-1] for i in items]
    out = []
    for item, tail in zip(items, last, strict=True):
        key = _key(item)
        if key.startswith(WHERE_KEYS) or last.count(tail) > 1 or key == tail:
            out.append(item)
        else:
            out.append(tail + item[len(item.partition("=")[0]):])
    return out


def job_run_name(num: int | str, override_dirname: str, varying: Sequence[str]) -> str:
    """``topk=5 dataset=qasper #3``: the job's overrides (Hydra's ``override_dirname``), the swept keys first in
    command-line order, then the rest; keys shortened (``short_items``); the job number last."""
    items = split_overrides(override_dirname)
    rank = {k: i for i, k in enumerate(varying)}
    ordered = sorted(items, key=lambda i: rank.get(_key(i), len(rank)))
    return " ".join([*short_items(ordered), f"#{num}"])


def parse_run_name(name: str) -> tuple[str, list[str]]:
    """(``#n`` or "", overrides) of a run name: ``topk=5 dataset=qasper #3`` or the older ``#3 a=1,b=2``."""
    name = (name or "").strip()
    head, _, rest = name.partition(" ")
    if _NUMBER.match(head):
        return head, split_overrides(rest)
    words = split_overrides(name, " ")
    if words and _NUMBER.match(words[-1]):
        return words[-1], words[:-1]
    return "", split_overrides(name)


def job_labels(run_names: dict[str, str]) -> dict[str, str]:
    """Short terminal labels: only the overrides that differ between the sweep's jobs, and the job number
    (a value every job shares is noise in a comparison). Run names are ``topk=5 dataset=qasper #3``
    (``ragbench.tracking.run_names``) or, from older sweeps, ``#3 dataset=qasper,retrieval.topk=5``."""
    parsed = {run_id: parse_run_name(name) for run_id, name in run_names.items()}
    values: dict[str, set[str]] = {}
    shared_by = Counter(item for _, items in parsed.values() for item in set(items))
    for _, items in parsed.values():
        for item in items:
            key, _, value = item.partition("=")
            values.setdefault(key, set()).add(value)
    out = {}
    for run_id, (num, items) in parsed.items():
        keep = [i for i in items if len(values[i.partition("=")[0]]) > 1 or shared_by[i] < len(parsed)]
        first_num = (run_names[run_id] or "").startswith("#")
        out[run_id] = " ".join([num, *keep] if first_num else [*keep, num]).strip() or num
    return out
