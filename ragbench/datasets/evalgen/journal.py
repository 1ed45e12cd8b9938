"""Files of a generation run: the resume journal (``<out>.partial.jsonl``), the EasyRAG evaluation set and
its seeded train/test split. Every file is written atomically."""

from __future__ import annotations

import json
import os
import random
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragbench.cache.files import write_json_atomic
from ragbench.errors import ConfigError


@dataclass(frozen=True)
class Outcome:
    """What became of one slot: kept (with its EasyRAG sample) or dropped (with the reason)."""

    slot: int
    question_type: str
    status: str  # kept | dropped
    reason: str | None = None
    detail: str = ""
    item: Mapping[str, Any] | None = None
    cost_usd: float = 0.0


def journal_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial.jsonl")


class Journal:
    """Append-only record of finished slots; a run started again with the same identity skips them."""

    def __init__(self, out: Path, identity: Mapping[str, Any], *, force: bool = False) -> None:
        self.path = journal_path(out)
        self.identity = dict(identity)
        self.done: dict[int, Outcome] = {}
        if self.path.exists() and not force:
            self._load()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"header": self.identity}, sort_keys=True) + "\n", encoding="utf-8")

    def _load(self) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        try:
            header = json.loads(lines[0])["header"] if lines else None
        except (json.JSONDecodeError, KeyError, TypeError):
            header = None
        if header != json.loads(json.dumps(self.identity)):
            differs = sorted(k for k in set(self.identity) | set(header or {})
                             if (header or {}).get(k) != json.loads(json.dumps(self.identity.get(k))))
            raise ConfigError(
                f"{self.path} holds an unfinished run of another configuration (differs in: "
                f"{', '.join(differs) or 'header'})\n  fix: rerun with the same settings to resume it, "
                f"or add force=true to start over")
        for line in lines[1:]:
            try:  # a line cut by a kill is simply redone
                row = json.loads(line)
                self.done[int(row["slot"])] = Outcome(**row)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue

    def record(self, outcome: Outcome) -> None:
        """Appends one outcome, flushed and synced so a kill right after keeps it."""
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(outcome), sort_keys=True, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.done[outcome.slot] = outcome

    def kept(self) -> Iterator[Outcome]:
        return (o for _, o in sorted(self.done.items()) if o.status == "kept")

    def finish(self) -> None:
        self.path.unlink(missing_ok=True)


def write_json(path: Path, data: Any) -> None:
    """``data`` as indented UTF-8 JSON in its own key order, written atomically (``write_json_atomic``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data, indent=2, sort_keys=False, newline=True)


def check_share(test_share: float) -> None:
    """A ConfigError unless the test share is strictly between 0 and 1."""
    if not 0 < test_share < 1:
        raise ConfigError(f"split={test_share} is not valid: it is the share of items held out for testing\n"
                          "  fix: give a number between 0 and 1 (e.g. split=0.5), or split=null for no split")


def split_samples(samples: Sequence[Mapping[str, Any]], *, test_share: float, seed: int
                  ) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(train, test): within each question type a seeded shuffle, ``round(test_share * k)`` to test."""
    check_share(test_share)
    by_type: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for s in samples:
        by_type[str(s.get("question_type"))].append(s)
    rng = random.Random(seed)
    train: list[Mapping[str, Any]] = []
    test: list[Mapping[str, Any]] = []
    for qtype in sorted(by_type):
        group = list(by_type[qtype])
        rng.shuffle(group)
        k = round(test_share * len(group))
        test.extend(group[:k])
        train.extend(group[k:])
    order = {s["id"]: i for i, s in enumerate(samples)}
    return sorted(train, key=lambda s: order[s["id"]]), sorted(test, key=lambda s: order[s["id"]])


def write_set(out: Path, samples: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any], *,
              test_share: float | None, seed: int) -> list[Path]:
    """The evaluation set (``{"metadata", "samples"}``), plus ``<stem>.train.json`` / ``.test.json``."""
    write_json(out, {"metadata": dict(metadata), "samples": list(samples)})
    written = [out]
    if test_share is not None:
        train, test = split_samples(samples, test_share=test_share, seed=seed)
        for name, part in (("train", train), ("test", test)):
            path = out.with_name(f"{out.stem}.{name}{out.suffix or '.json'}")
            meta = {**metadata, "split": {"part": name, "test_share": test_share, "seed": seed, "of": out.name}}
            write_json(path, {"metadata": meta, "samples": part})
            written.append(path)
    return written
