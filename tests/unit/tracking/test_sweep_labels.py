"""The sweep table's job labels show only the overrides that tell jobs apart."""

from __future__ import annotations

from ragbench.sweep import job_labels, split_overrides


def test_split_keeps_bracketed_lists_whole():
    assert split_overrides("cache.dir=/x,reranker=[cross_encoder,mmr],retrieval=bm25") == [
        "cache.dir=/x", "reranker=[cross_encoder,mmr]", "retrieval=bm25"]
    assert split_overrides("") == []


def test_labels_drop_overrides_every_job_shares():
    names = {
        "a": "#0 cache.dir=/tmp/c,dataset=qasper,expander.parent_depth=0,retrieval=dense",
        "b": "#1 cache.dir=/tmp/c,dataset=qasper,expander.parent_depth=2,retrieval=dense",
        "c": "#2 cache.dir=/tmp/c,dataset=qasper,expander.parent_depth=0,retrieval=bm25",
    }
    assert job_labels(names) == {
        "a": "#0 expander.parent_depth=0 retrieval=dense",
        "b": "#1 expander.parent_depth=2 retrieval=dense",
        "c": "#2 expander.parent_depth=0 retrieval=bm25",
    }


def test_an_override_only_some_jobs_have_is_kept():
    labels = job_labels({"a": "#0 dataset=locomo", "b": "#1 dataset=locomo,retrieval.topk=3"})
    assert labels == {"a": "#0", "b": "#1 retrieval.topk=3"}
