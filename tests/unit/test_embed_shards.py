"""``stages=encode embedder.shard=i/n``: shard rows, shard entries, their assembly into the index entry."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragbench.cache.files import MANIFEST
from ragbench.cache.store import StageCache
from ragbench.config_check import check_shard
from ragbench.embed.shard import EncodeShard, parse_shard
from ragbench.embed.shard_entries import STAGE
from ragbench.errors import CacheError, ConfigError, IndexMismatchError
from ragbench.pipeline import Pipeline
from ragbench.retrieval.vectors import concat_to_file
from tests.fixtures.toy import HashEmbedder, toy_components


class BatchEmbedder(HashEmbedder):
    """HashEmbedder whose vectors also depend on the encode call they were made in (as a real encoder's
    padding does): a shard cut anywhere but at a full encode's call boundaries would change them."""

    def __init__(self, shard: str | None = None, tag: str = "a") -> None:
        super().__init__()
        self.shard = parse_shard(shard)
        self.tag = tag
        self.documents: list[list[str]] = []

    @property
    def identity(self) -> str:
        return f"batch-{self.tag}"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.documents.append(list(texts))
        vecs = super().embed_documents(texts)
        vecs[:, 0] += 1e-3 * len(texts)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return super().embed_documents(texts)


def _entry(cache_dir: Path, stage: str) -> Path:
    (folder,) = [p for p in (cache_dir / stage).iterdir() if p.is_dir() and not p.name.startswith(".")]
    return folder


@pytest.mark.parametrize(("total", "spill", "n", "rows"), [
    (10, 3, 2, [(0, 6), (6, 10)]),                  # blocks of 3: [0,3) [3,6) [6,9) [9,10), two per shard
    (10, 3, 3, [(0, 3), (3, 6), (6, 10)]),          # 4 blocks over 3 shards: 1, 1, 2
    (10, 3, 5, [(0, 0), (0, 3), (3, 6), (6, 9), (9, 10)]),  # more shards than blocks: one is empty
    (5, 8, 2, [(0, 0), (0, 5)]),                    # one encode call for the whole corpus: one shard holds it
    (4, 1, 4, [(0, 1), (1, 2), (2, 3), (3, 4)]),
])
def test_shards_are_whole_encode_blocks_that_tile_the_corpus(total, spill, n, rows):
    got = [EncodeShard(i, n).rows(total, spill) for i in range(n)]
    assert [(r.start, r.stop) for r in got] == rows


@pytest.mark.parametrize(("value", "start"), [
    ("4/4", "embedder.shard=4/4: shard numbers run from 0 to 3 for 4 shards; fix: embedder.shard=0/4,1/4,2/4,3/4"),
    ("0/0", "embedder.shard=0/0: the number of shards must be at least 1; fix: embedder.shard=0/1"),
    ("-1/2", "embedder.shard=-1/2: shard numbers run from 0 to 1"),
    ("x", "embedder.shard='x' is not of the form i/n"),
    (3, "embedder.shard=3 is not of the form i/n"),
    ("1/2/3", "embedder.shard='1/2/3' is not of the form i/n"),
])
def test_a_bad_shard_is_one_named_line_with_the_fix(value, start):
    with pytest.raises(ConfigError) as err:
        parse_shard(value)
    assert str(err.value).startswith(start) and "fix:" in str(err.value) and "\n" not in str(err.value)


def _cfg(**over):
    cfg = {"stages": "encode", "embedder": {"_target_": "x", "shard": "0/2"}, "retrieval": {"parent_vectors": "none"},
           "cache": {"mode": "read_write"}}
    cfg.update(over)
    return cfg


@pytest.mark.parametrize(("cfg", "start"), [
    (_cfg(stages="all"), "embedder.shard=0/2 encodes one slice of the corpus vectors and searches nothing; fix: add "
                         "stages=encode"),
    (_cfg(embedder={"_target_": "x", "shard": None}), "stages=encode encodes the corpus vectors of embedder.shard=i/n"),
    (_cfg(embedder=None), "stages=encode needs an embedder; fix: set embedder=minilm"),
    (_cfg(cache={"mode": "off"}), "stages=encode stores its shard in the stage cache, which cache.mode=off"),
    (_cfg(retrieval={"parent_vectors": "mean"}), "embedder.shard cannot split retrieval.parent_vectors=mean"),
    (_cfg(embedder={"_target_": "x", "shard": "2/2"}), "embedder.shard=2/2: shard numbers run from 0 to 1"),
])
def test_shard_and_stages_encode_go_together(cfg, start):
    with pytest.raises(ConfigError) as err:
        check_shard(cfg)
    assert str(err.value).startswith(start) and "fix:" in str(err.value) and "\n" not in str(err.value)
    check_shard(_cfg())
    check_shard(_cfg(stages="retrieval", embedder={"_target_": "x", "shard": None}))


def _job(emb, cache_dir, **over):
    return Pipeline(toy_components(embedder=emb, **over), cache=StageCache(dir=str(cache_dir)))


def test_shards_concatenated_are_the_full_encode_and_the_search_encodes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr("ragbench.pipeline.SPILL_ROWS", 1)  # the toy corpus (4 sentences): 4 encode calls
    full_emb = BatchEmbedder()
    full = _job(full_emb, tmp_path / "full").run()
    assert [len(call) for call in full_emb.documents] == [1, 1, 1, 1]
    shard_embs = [BatchEmbedder(f"{i}/3") for i in range(3)]
    results = [_job(emb, tmp_path / "shards").run() for emb in shard_embs]
    assert [r.counts["shard_rows"] for r in results] == [1, 1, 2]  # 4 blocks over 3 shards
    assert all(r.cases == () and "retrieval/mrr_at_10" not in r.metrics for r in results)  # nothing searched
    assert results[0].metrics["cache/index_shard/misses"] == 1 and results[2].counts["embedded_texts"] == 2
    assert not list((tmp_path / "shards" / "index").glob("*"))  # no index entry: only shards

    search_emb = BatchEmbedder()
    cache = StageCache(dir=str(tmp_path / "shards"))
    searched = Pipeline(toy_components(embedder=search_emb), cache=cache).run()
    assert search_emb.documents == [] and searched.counts["embedded_texts"] == 0  # assembled, not encoded
    assert cache.hits[STAGE] == 3 and cache.misses["index"] == 1
    assert searched.metrics["retrieval/mrr_at_10"] == full.metrics["retrieval/mrr_at_10"]
    assert [[h.chunk_id for h in c.hits] for c in searched.cases] == [[h.chunk_id for h in c.hits] for c in full.cases]
    assembled = np.load(_entry(tmp_path / "shards", "index") / "vectors.npy")
    assert np.array_equal(assembled, np.load(_entry(tmp_path / "full", "index") / "vectors.npy"))  # bit for bit
    assert not list((tmp_path / "shards" / "index").glob(".spill-*"))  # moved into the entry

    again = BatchEmbedder("1/3")  # a shard job run again: its entry is there
    rerun = _job(again, tmp_path / "shards").run()
    assert rerun.metrics["cache/index_shard/hits"] == 1 and again.documents == []


def test_a_shard_cut_elsewhere_would_differ(tmp_path, monkeypatch):
    """The test embedder really is call-sensitive: one call over the corpus gives other bytes."""
    monkeypatch.setattr("ragbench.pipeline.SPILL_ROWS", 1)
    blocks = _job(BatchEmbedder(), tmp_path / "a").run()
    monkeypatch.setattr("ragbench.pipeline.SPILL_ROWS", 100)
    one = _job(BatchEmbedder(), tmp_path / "b").run()
    assert blocks.counts["embedded_texts"] == one.counts["embedded_texts"] == 4
    assert not np.array_equal(np.load(_entry(tmp_path / "a", "index") / "vectors.npy"),
                              np.load(_entry(tmp_path / "b", "index") / "vectors.npy"))


def test_a_missing_shard_is_one_line_naming_it_and_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr("ragbench.pipeline.SPILL_ROWS", 1)
    _job(BatchEmbedder("0/4"), tmp_path).run()
    _job(BatchEmbedder("2/4"), tmp_path).run()
    with pytest.raises(CacheError) as err:
        _job(BatchEmbedder(), tmp_path).run()
    line = str(err.value)
    assert line.startswith(f"index shard(s) 1/4,3/4 of this corpus are missing from the cache at {tmp_path} (2 of "
                           "4 there); fix:")
    assert f"python -m ragbench -m stages=encode embedder.shard=1/4,3/4 cache.dir={tmp_path}" in line
    assert "\n" not in line


def test_shards_of_another_embedder_are_named_and_not_used(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr("ragbench.pipeline.SPILL_ROWS", 1)
    for i in range(2):
        _job(BatchEmbedder(f"{i}/2", tag="other"), tmp_path).run()
    emb = BatchEmbedder()
    with caplog.at_level(logging.WARNING, logger="ragbench.embed.shard_entries"):
        result = _job(emb, tmp_path).run()
    assert result.counts["embedded_texts"] == 4  # its own vectors: encoded
    (line,) = [r.getMessage() for r in caplog.records]
    assert "holds 2 index shard(s) of this corpus made with other settings (embedder; embedder batch-other|" in line
    assert "fix: encode shards with this job's embedder settings" in line


def test_a_shard_entry_holding_another_embedders_vectors_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("ragbench.pipeline.SPILL_ROWS", 1)
    for i in range(2):
        _job(BatchEmbedder(f"{i}/2"), tmp_path).run()
    folder = sorted(p for p in (tmp_path / STAGE).iterdir() if p.is_dir() and not p.name.startswith("."))[0]
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["embedder"] = "batch-other|parents=none"  # a shard written by another embedder under this key
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError) as err:
        _job(BatchEmbedder(), tmp_path).run()
    assert "embedder: stored 'batch-other|parents=none', now 'batch-a|parents=none'" in str(err.value)
    assert "fix: rebuild it with cache.mode=refresh" in str(err.value)


def test_concat_to_file_skips_empty_shards_and_refuses_mixed_widths(tmp_path):
    a, b = np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((2, 2), np.float32)
    out = concat_to_file([a, np.zeros((0, 0), np.float32), b], tmp_path, block=2)
    assert np.array_equal(out, np.vstack([a, b])) and Path(out.filename).name.startswith(".spill-")
    with pytest.raises(Exception, match="different widths"):
        concat_to_file([a, np.ones((1, 3), np.float32)], tmp_path)


def test_the_searching_jobs_keys_never_depend_on_shards(tmp_path, monkeypatch):
    monkeypatch.setattr("ragbench.pipeline.SPILL_ROWS", 1)
    plain = _job(BatchEmbedder(), tmp_path / "plain").run()
    for i in range(2):
        _job(BatchEmbedder(f"{i}/2"), tmp_path / "sharded").run()
    sharded = _job(BatchEmbedder(), tmp_path / "sharded").run()
    keys = {k: v for k, v in sharded.cache_keys.items() if k != STAGE}
    assert keys == plain.cache_keys and sharded.fingerprints == plain.fingerprints
    from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

    # built, never loaded (no model import): the shard it encodes is not part of its identity
    assert SentenceTransformerEmbedder(shard="0/2").identity == SentenceTransformerEmbedder().identity
    assert SentenceTransformerEmbedder(shard="1/2").shard == EncodeShard(1, 2)
