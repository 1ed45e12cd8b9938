"""faiss IVF/HNSW options, recall against exact search, flat search in place, vectors spilled to disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragbench.cache.entries import load_vectors, save_vectors
from ragbench.cache.store import StageCache
from ragbench.errors import ConfigError
from ragbench.pipeline import Pipeline
from ragbench.retrieval import dense
from ragbench.retrieval.ann_recall import recall_vs_exact
from ragbench.retrieval.dense import FaissRetriever
from ragbench.retrieval.vectors import encode_to_file, exact_search, open_vectors, spilled_file
from ragbench.types import Hit
from tests.fixtures.toy import HashEmbedder, toy_components


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"index": "pq"}, "retrieval.retriever.index='pq' is not valid; choose one of ['flat', 'ivf', 'hnsw']"),
    ({"index": "ivf", "nlist": 0}, "retrieval.retriever.nlist=0"),
    ({"index": "ivf", "nlist": 8, "nprobe": 9}, "retrieval.retriever.nprobe=9"),
    ({"index": "ivf", "train_size": 2.5}, "retrieval.retriever.train_size=2.5"),
    ({"index": "hnsw", "hnsw_m": 1}, "retrieval.retriever.hnsw_m=1"),
    ({"index": "hnsw", "ef_search": "many"}, "retrieval.retriever.ef_search='many'"),
    ({"index": "hnsw", "ef_construction": True}, "retrieval.retriever.ef_construction=True"),
])
def test_bad_index_options_are_one_named_line(kwargs, key):
    with pytest.raises(ConfigError) as err:
        FaissRetriever(**kwargs)
    assert str(err.value).startswith(key) and "\n" not in str(err.value)


def test_index_options_enter_the_index_key_only_for_their_index():
    assert FaissRetriever().params() == {"retriever": "faiss", "index": "flat"}  # unchanged: old caches still hit
    assert FaissRetriever(index="ivf", nlist=64, nprobe=4, train_size=1000).params() == {
        "retriever": "faiss", "index": "ivf", "nlist": 64, "nprobe": 4, "train_size": 1000}


def test_recall_vs_exact_by_hand():
    approx = [["a", "b", "c"], ["d", "x"]]
    exact = [["a", "c", "e"], ["d", "e"]]
    got = recall_vs_exact(approx, exact, [1, 2, 3])
    # k=1: 1, 1; k=2: {a,b}&{a,c} = 1/2, {d,x}&{d,e} = 1/2; k=3: 2/3, and 1/2 of the two exact hits
    assert got == pytest.approx({"retrieval/ann_recall_at_1": 1.0, "retrieval/ann_recall_at_2": 0.5,
                                 "retrieval/ann_recall_at_3": (2 / 3 + 1 / 2) / 2})
    assert recall_vs_exact([[]], [[]], [1]) == {}  # no exact hit: nothing to recall


def _unit(angles_deg):
    a = np.radians(np.asarray(angles_deg, dtype=np.float64))
    return np.stack([np.cos(a), np.sin(a)], axis=1).astype(np.float32)


def test_ann_recall_against_the_exact_top_k_by_hand():
    # four unit vectors at 0, 10, 50, 90 degrees; the query at 20: exact order r1 (10), r0 (0), r2 (50), r3
    ids = ["r0", "r1", "r2", "r3"]
    retriever = FaissRetriever(index="ivf", nlist=4, nprobe=1)  # 4 rows: one list (under 39 rows per list)
    retriever.build(ids=ids, texts=ids, vectors=_unit([0, 10, 50, 90]))
    q = _unit([20])
    hits = [[Hit(chunk_id="r1", score=1.0, rank=1), Hit(chunk_id="r2", score=0.9, rank=2)]]  # an ANN's answer
    got = retriever.ann_recall(vectors=q, hits=hits, ks=[1, 2])
    assert got == {"retrieval/ann_recall_at_1": 1.0, "retrieval/ann_recall_at_2": 0.5}  # {r1,r2} & {r1,r0}
    assert FaissRetriever().ann_recall(vectors=q, hits=hits, ks=[1]) == {}  # flat is the reference itself


def _clustered(n, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((8, dim), dtype=np.float32)
    x = centres[rng.integers(0, 8, n)] + 0.4 * rng.standard_normal((n, dim), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_ivf_probing_every_list_is_exact_and_reproducible():
    x = _clustered(800)
    ids = [f"c{i}" for i in range(len(x))]
    q = x[:20] + 0.01
    flat = FaissRetriever()
    flat.build(ids=ids, texts=ids, vectors=x)
    ivf = FaissRetriever(index="ivf", nlist=16, nprobe=16)  # 800 rows: 16 lists (>= 39 rows each)
    ivf.build(ids=ids, texts=ids, vectors=x)
    assert ivf._index.nlist == 16  # noqa: SLF001
    hits = ivf.search(texts=[], vectors=q, k=10)
    assert hits == flat.search(texts=[], vectors=q, k=10)
    assert ivf.ann_recall(vectors=q, hits=hits, ks=[10]) == {"retrieval/ann_recall_at_10": 1.0}
    again = FaissRetriever(index="ivf", nlist=16, nprobe=2)
    again.build(ids=ids, texts=ids, vectors=x)
    one = FaissRetriever(index="ivf", nlist=16, nprobe=2)
    one.build(ids=ids, texts=ids, vectors=x)
    assert again.search(texts=[], vectors=q, k=10) == one.search(texts=[], vectors=q, k=10)  # seeded training
    assert FaissRetriever(index="ivf").depth_limit(5) is None


def test_flat_in_place_search_equals_faiss_flat(monkeypatch):
    x = _clustered(3000, dim=32)
    x[5] = x[7]  # a tie: the lower row first
    ids = [f"c{i}" for i in range(len(x))]
    q = np.concatenate([x[[7]], x[:40] + 0.02])
    want = FaissRetriever()
    want.build(ids=ids, texts=ids, vectors=x)
    monkeypatch.setattr(dense, "FLAT_IN_PLACE_ROWS", 1000)
    monkeypatch.setattr("ragbench.retrieval.vectors.SEARCH_BLOCK_ROWS", 1024)
    got = FaissRetriever()
    got.build(ids=ids, texts=ids, vectors=x)
    assert type(got._index).__name__ == "BlockFlatIndex"  # noqa: SLF001
    assert got.search(texts=[], vectors=q, k=10) == want.search(texts=[], vectors=q, k=10)
    s, r = exact_search(x, q, 12, block=1024)
    ws, wr = want._index.search(q, 12)  # noqa: SLF001
    assert np.array_equal(s, ws) and sorted(r[0][:2]) == [5, 7]


def _encoder(calls):
    def encode(texts):
        calls.append(len(texts))
        return np.asarray([[len(t), i % 3] for i, t in enumerate(texts)], dtype=np.float64)
    return encode


def test_vectors_spill_to_disk_and_round_trip_memory_mapped(tmp_path: Path):
    texts = [f"text {'x' * i}" for i in range(23)]
    calls: list[int] = []
    vecs = encode_to_file(_encoder(calls), texts, tmp_path / "index", block=7)
    assert calls == [7, 7, 7, 2] and isinstance(vecs, np.memmap) and vecs.dtype == np.float32
    want = np.concatenate([_encoder([])(texts[s: s + 7]) for s in range(0, 23, 7)]).astype(np.float32)
    assert np.array_equal(vecs, want)
    spill = spilled_file(vecs)
    assert spill is not None and spill.parent == tmp_path / "index"
    entry = tmp_path / "entry"
    entry.mkdir()
    ids = [str(i) for i in range(23)]
    save_vectors((ids, vecs), entry)  # moved into the entry, not written twice
    assert not spill.exists() and (entry / "vectors.npy").exists()
    got_ids, got = load_vectors(entry)
    assert got_ids == ids and isinstance(got, np.memmap) and got.mode == "r" and np.array_equal(got, want)
    assert isinstance(open_vectors(entry / "vectors.npy"), np.memmap)
    with pytest.raises(ValueError):
        got[0, 0] = 1.0  # read-only mapping


def test_vectors_spilled_without_a_cache_leave_no_file(tmp_path: Path):
    vecs = encode_to_file(_encoder([]), ["a", "bb", "ccc"], None, block=2)
    assert spilled_file(vecs) is None and vecs[2, 0] == 3.0
    save_vectors((["0", "1", "2"], vecs), tmp_path)  # nothing to move: written as before
    assert np.array_equal(load_vectors(tmp_path)[1], vecs)


def test_a_job_logs_ann_recall_and_its_spilled_vectors_come_back_from_the_cache(tmp_path, monkeypatch):
    emb = HashEmbedder()
    plain = Pipeline(toy_components(embedder=emb, retriever=FaissRetriever(index="hnsw", ef_search=8))).run()
    monkeypatch.setattr("ragbench.pipeline.SPILL_ROWS", 3)  # the toy corpus (4 sentences) spills in 2 blocks
    spilled_emb = HashEmbedder()
    first = Pipeline(toy_components(embedder=spilled_emb, retriever=FaissRetriever(index="hnsw", ef_search=8)),
                     cache=StageCache(dir=str(tmp_path))).run()
    assert spilled_emb.calls[:2] == [3, 1]
    assert not list((tmp_path / "index").glob(".spill-*"))  # moved into the entry
    for key in ("retrieval/ann_recall_at_1", "retrieval/ann_recall_at_5", "retrieval/ann_recall_at_10"):
        assert first.metrics[key] == plain.metrics[key] == 1.0  # 4 rows: HNSW finds them all
    assert [[h.chunk_id for h in c.hits] for c in first.cases] == [[h.chunk_id for h in c.hits] for c in plain.cases]
    cache = StageCache(dir=str(tmp_path))
    again = Pipeline(toy_components(embedder=spilled_emb, retriever=FaissRetriever(index="hnsw", ef_search=8)),
                     cache=cache).run()
    assert cache.hits["retrieval"] == 1 and again.metrics["retrieval/ann_recall_at_10"] == 1.0  # from the manifest
    flat = Pipeline(toy_components(embedder=HashEmbedder())).run()
    assert not [k for k in flat.metrics if "ann_recall" in k]
