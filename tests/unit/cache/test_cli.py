"""``python -m ragbench.cache info|prune`` over a real StageCache folder."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest
from filelock import FileLock

from ragbench.cache import cli
from ragbench.cache.store import StageCache
from ragbench.errors import CacheError, ConfigError

DAY = 86400.0
KEYS = {name: (name * 64)[:64] for name in ("a", "b", "c", "d", "e")}  # valid 64-hex keys


def _save(value: bytes, folder: Path) -> None:
    (folder / "blob.bin").write_bytes(value)


def _load(folder: Path, manifest) -> bytes:
    return (folder / "blob.bin").read_bytes()


def _folder(cache: StageCache, stage: str, key: str, payload: bytes) -> tuple[bytes, bool]:
    return cache.folder(stage, key, {"what": stage}, lambda: payload, _save, _load)


def _age_folder(root: Path, stage: str, key: str, days: float) -> None:
    manifest = root / stage / key / "manifest.json"
    data = json.loads(manifest.read_text())
    data["created"] = time.time() - days * DAY
    manifest.write_text(json.dumps(data))


def _age_record(root: Path, stage: str, key: str, days: float) -> None:
    t = time.time() - days * DAY
    os.utime(root / stage / key[:2] / f"{key}.json", (t, t))


@pytest.fixture()
def store(tmp_path) -> Path:
    """Two index entries (one 10 days old), two answers (one 10 days old), one fresh verdict."""
    root = tmp_path / "cache"
    cache = StageCache(dir=str(root))
    _folder(cache, "index", KEYS["a"], b"x" * 1000)
    _folder(cache, "index", KEYS["b"], b"y" * 500)
    cache.put_record("answers", KEYS["c"], {"m": 1}, {"text": "old"})
    cache.put_record("answers", KEYS["d"], {"m": 1}, {"text": "new"})
    cache.put_record("verdicts", KEYS["e"], {"j": 1}, {"f1": 1.0})
    _age_folder(root, "index", KEYS["a"], 10)
    _age_record(root, "answers", KEYS["c"], 10)
    return root


@pytest.mark.parametrize(("text", "seconds"), [
    ("7d", 7 * DAY), ("12h", 12 * 3600), ("30m", 1800), ("90s", 90), ("90", 90), ("2w", 14 * DAY),
    ("1.5h", 5400), ("0", 0),
])
def test_parse_age(text, seconds):
    assert cli.parse_age(text) == seconds


@pytest.mark.parametrize("text", ["7x", "", "-1d", "d7", "7 days"])
def test_parse_age_rejects_with_the_valid_units(text):
    with pytest.raises(ConfigError, match=r"units s, m, h, d, w"):
        cli.parse_age(text)


def test_info_counts_entries_and_bytes_per_stage(store):
    # build leftovers and locks are not entries
    (store / "index" / f".{KEYS['a'][:12]}-tmpbuild").mkdir()
    rows = {r.stage: r for r in cli.info(store)}
    assert sorted(rows) == ["answers", "index", "verdicts"]
    assert rows["index"].entries == 2 and rows["answers"].entries == 2 and rows["verdicts"].entries == 1
    manifests = sum((store / "index" / k / "manifest.json").stat().st_size for k in (KEYS["a"], KEYS["b"]))
    assert rows["index"].size == 1500 + manifests
    assert rows["index"].oldest == pytest.approx(time.time() - 10 * DAY, abs=60)
    assert rows["index"].newest == pytest.approx(time.time(), abs=60)


def test_info_of_a_missing_cache_is_empty(tmp_path):
    assert cli.info(tmp_path / "nowhere") == []


def test_prune_removes_only_old_entries_and_the_cache_then_misses_them(store):
    res = cli.prune(store, older_than_s=7 * DAY)
    assert (res.removed, res.kept, res.skipped_locked) == (2, 3, 0)
    assert res.freed > 1000
    assert not (store / "index" / KEYS["a"]).exists()
    assert not (store / "answers" / KEYS["c"][:2]).exists()  # emptied shard folder goes too
    cache = StageCache(dir=str(store))
    assert _folder(cache, "index", KEYS["a"], b"rebuilt") == (b"rebuilt", False)
    assert _folder(cache, "index", KEYS["b"], b"unused") == (b"y" * 500, True)
    assert cache.get_record("answers", KEYS["c"]) is None
    assert cache.get_record("answers", KEYS["d"]) == {"text": "new"}


def test_prune_one_stage_leaves_the_others(store):
    res = cli.prune(store, older_than_s=0, stage="answers")
    assert res.removed == 2
    assert {r.stage: r.entries for r in cli.info(store)} == {"answers": 0, "index": 2, "verdicts": 1}


def test_prune_unknown_stage_lists_the_stages(store):
    with pytest.raises(CacheError, match=r"'indexes' is not a stage .* answers, index, verdicts"):
        cli.prune(store, older_than_s=0, stage="indexes")


def test_dry_run_removes_nothing(store):
    res = cli.prune(store, older_than_s=7 * DAY, dry_run=True)
    assert res.removed == 2
    assert sum(r.entries for r in cli.info(store)) == 5


def test_prune_skips_an_entry_a_running_job_holds(store):
    with FileLock(str(store / "index" / f"{KEYS['a']}.lock")):
        res = cli.prune(store, older_than_s=7 * DAY)
    assert res.skipped_locked == 1 and res.removed == 1
    assert (store / "index" / KEYS["a"] / "manifest.json").exists()


def test_prune_clears_leftovers_of_killed_jobs_but_not_a_running_build(store):
    idx = store / "index"
    dead = idx / f".{KEYS['b'][:12]}-killed"  # its lock is free: the builder died
    dead.mkdir()
    (dead / "vectors.npy").write_bytes(b"partial")
    running = idx / f".{KEYS['a'][:12]}-running"
    running.mkdir()
    orphan_lock = idx / f"{'f' * 64}.lock"
    orphan_lock.touch()
    tmp_record = store / "answers" / KEYS["d"][:2] / ".tmp-half"
    tmp_record.write_text("{")
    dead_holder = idx / f"{'e' * 64}.lock.holder"  # the holder note of a job killed while holding its lock
    dead_holder.write_text("{}")
    live_holder = idx / f"{KEYS['a']}.lock.holder"
    live_holder.write_text("{}")
    old = time.time() - DAY
    for p in (dead, running, orphan_lock, tmp_record, dead_holder, live_holder):
        os.utime(p, (old, old))
    with FileLock(str(idx / f"{KEYS['a']}.lock")):
        res = cli.prune(store, older_than_s=3600)
    assert res.leftovers == 4
    assert not dead.exists() and not orphan_lock.exists() and not tmp_record.exists() and not dead_holder.exists()
    assert running.exists() and live_holder.exists()


def test_main_info_and_prune_messages(store, capsys, caplog):
    caplog.set_level(logging.INFO, logger="ragbench.cache")
    assert cli.main(["--dir", str(store), "info"]) == 0
    out = capsys.readouterr().out
    assert "index" in out and "answers" in out and "verdicts" in out and "total" in out
    assert cli.main(["--dir", str(store), "prune", "--older-than", "7d", "--stage", "index"]) == 0
    assert "removed 1 entries" in caplog.text and "stage 'index'" in caplog.text and "kept 1 newer" in caplog.text
    assert cli.main(["--dir", str(store), "prune", "--older-than", "soon"]) == 2
    assert "'soon' is not an age" in caplog.text


def test_default_dir_follows_the_config_default(monkeypatch, tmp_path):
    monkeypatch.setenv(cli.ENV_VAR, str(tmp_path / "shared"))
    assert cli.default_dir() == tmp_path / "shared"
    monkeypatch.delenv(cli.ENV_VAR)
    assert cli.default_dir() == Path(".ragbench_cache")
