"""Sampling: hand-worked quotas, the three modes, multi-document questions, seeds, bad specs."""

from __future__ import annotations

from collections import Counter

import pytest

from ragbench.datasets.locomo import LocomoAdapter
from ragbench.datasets.sampling import quotas, sample
from ragbench.datasets.syllabusqa import SyllabusQAAdapter
from ragbench.errors import ConfigError
from ragbench.types import Document, Query


def docs(n: int) -> list[Document]:
    return [Document(doc_id=f"d{i}", title=f"d{i}", text="x") for i in range(n)]


def q(qid: str, qtype: str, *doc_ids: str) -> Query:
    return Query(qid=qid, text=qid, answers=("a",), question_type=qtype, doc_ids=doc_ids)


def run(d, qs, **kw):
    spec = {"num_docs": None, "sample_size": None, "stratify": False, "seed": 42} | kw
    return sample(d, qs, **spec)


def test_quotas_largest_remainder_worked_example():
    # exact shares of 4 over 5:3:2 are 2.0, 1.2, 0.8 -> floors 2, 1, 0; the one left goes to the
    # largest remainder (c: 0.8), not to b (0.2)
    assert quotas({"a": 5, "b": 3, "c": 2}, 4) == {"a": 2, "b": 1, "c": 1}
    assert quotas({"a": 5, "b": 3, "c": 2}, 10) == {"a": 5, "b": 3, "c": 2}
    assert quotas({"b": 1, "a": 1}, 1) == {"a": 1, "b": 0}  # tie broken by type name
    assert sum(quotas({"x": 7, "y": 6, "z": 1}, 5).values()) == 5


def test_no_sampling_keeps_everything_in_order():
    d = docs(3)
    qs = [q("q1", "a", "d0"), q("q2", "b", "d2")]
    assert run(d, qs) == (d, qs)
    assert run(d, qs, num_docs=5) == (d, qs) and run(d, qs, sample_size=9) == (d, qs)


def test_num_docs_keeps_all_questions_of_the_chosen_documents():
    d = docs(10)
    qs = [q(f"q{i}{j}", "t", f"d{i}") for i in range(10) for j in range(3)]
    kd, kq = run(d, qs, num_docs=3)
    kept = {x.doc_id for x in kd}
    assert len(kd) == 3 and [x.doc_id for x in kd] == sorted(kept, key=lambda s: int(s[1:]))
    assert len(kq) == 9 and all(x.doc_ids[0] in kept for x in kq)
    assert run(d, qs, num_docs=3) == (kd, kq)  # seeded


def test_seed_changes_the_draw():
    d = docs(30)
    qs = [q(f"q{i}", "t", f"d{i}") for i in range(30)]
    draws = {tuple(x.doc_id for x in run(d, qs, num_docs=5, seed=s)[0]) for s in range(5)}
    assert len(draws) > 1


def test_num_docs_keeps_multi_document_questions_whole():
    d = docs(12)
    qs = [q(f"m{i}", "inference", f"d{i}", f"d{(i + 1) % 12}") for i in range(12)]
    qs += [q(f"s{i}", "single", f"d{i}") for i in range(12)]
    kd, kq = run(d, qs, num_docs=4)
    kept = {x.doc_id for x in kd}
    assert len(kd) == 4
    assert all(set(x.doc_ids) <= kept for x in kq)
    assert any(len(x.doc_ids) == 2 for x in kq)  # drawn question by question, so pairs survive


def test_questions_without_documents_kept_in_proportion():
    d = docs(10)
    qs = [q(f"q{i}", "t", f"d{i}") for i in range(10)] + [q(f"null{i}", "null_query") for i in range(4)]
    kd, kq = run(d, qs, num_docs=5)
    assert len(kd) == 5
    assert sum(1 for x in kq if not x.doc_ids) == 2  # round(4 * 5 / 10)


def test_stratified_num_docs_round_robins_over_types():
    d = docs(6)
    qs = [q(f"a{i}", "A", f"d{i}") for i in range(4)] + [q(f"b{i}", "B", f"d{i}") for i in (4, 5)]
    for seed in range(5):
        _, kq = run(d, qs, num_docs=2, stratify=True, seed=seed)
        assert Counter(x.question_type for x in kq) == {"A": 1, "B": 1}


def test_sample_size_plain_and_stratified():
    d = docs(1)
    qs = [q(f"a{i}", "A", "d0") for i in range(50)] + [q(f"b{i}", "B", "d0") for i in range(30)]
    qs += [q(f"c{i}", "C", "d0") for i in range(20)]
    kd, kq = run(d, qs, sample_size=10, stratify=True)
    assert kd == d and len(kq) == 10
    assert Counter(x.question_type for x in kq) == {"A": 5, "B": 3, "C": 2}
    order = {x.qid: i for i, x in enumerate(qs)}
    assert [order[x.qid] for x in kq] == sorted(order[x.qid] for x in kq)
    _, plain = run(d, qs, sample_size=10)
    assert len(plain) == 10 and plain == run(d, qs, sample_size=10)[1]


def test_duplicate_qids_are_sampled_as_distinct_questions():
    qs = [q("same", "A", "d0") for _ in range(6)]
    assert len(run(docs(1), qs, sample_size=4)[1]) == 4


@pytest.mark.parametrize("spec", [
    {"num_docs": 2, "sample_size": 3}, {"num_docs": 0}, {"sample_size": -1}, {"num_docs": True}, {"sample_size": 2.5},
])
def test_bad_specs(spec):
    with pytest.raises(ConfigError, match="dataset."):
        run(docs(3), [q("q", "t", "d0")], **spec)


def test_spec_is_part_of_the_fingerprint_and_applied_by_adapters():
    full = SyllabusQAAdapter(name="syllabusqa", split="all").load()
    two = SyllabusQAAdapter(name="syllabusqa", split="all", num_docs=2, stratify=True).load()
    assert len(two.documents) == 2 and full.fingerprint != two.fingerprint
    assert {x.doc_ids[0] for x in two.queries} == {d.doc_id for d in two.documents}
    some = LocomoAdapter(name="locomo", sample_size=40, stratify=True).load()
    assert len(some.queries) == 40 and len(some.documents) == 2
    # 233 questions: 114 single_hop, 63 temporal, 43 multi_hop, 13 open_domain -> 19.6, 10.8, 7.4, 2.2
    assert Counter(x.question_type for x in some.queries) == {"single_hop": 20, "temporal": 11, "multi_hop": 7,
                                                             "open_domain": 2}
