"""Hand-worked IR metric examples plus agreement with pytrec_eval over random rankings."""

from __future__ import annotations

import math
import random

import pytest
import pytrec_eval

from ragbench.errors import RagbenchError
from ragbench.judge.ir import has_relevant, metric_names, retrieval_metrics

L2, L3, L5 = math.log2(2), math.log2(3), math.log2(5)


def test_binary_hand_worked() -> None:
    # ranked a b c d e; relevant b, d and f (f never retrieved) -> num_rel = 3
    m = retrieval_metrics(["a", "b", "c", "d", "e"], {"b": 1, "d": 1, "f": 1, "a": 0}, [1, 3, 5])
    idcg3 = 1 + 1 / L3 + 1 / 2
    assert m["hit_at_1"] == 0.0 and m["recall_at_1"] == 0.0 and m["precision_at_1"] == 0.0
    assert m["ndcg_at_1"] == 0.0 and m["map_at_1"] == 0.0 and m["mrr_at_1"] == 0.0
    assert m["hit_at_3"] == 1.0
    assert m["recall_at_3"] == pytest.approx(1 / 3)
    assert m["precision_at_3"] == pytest.approx(1 / 3)
    assert m["ndcg_at_3"] == pytest.approx((1 / L3) / idcg3)
    assert m["map_at_3"] == pytest.approx((1 / 2) / 3)
    assert m["mrr_at_3"] == pytest.approx(0.5)
    assert m["recall_at_5"] == pytest.approx(2 / 3)
    assert m["precision_at_5"] == pytest.approx(2 / 5)
    assert m["ndcg_at_5"] == pytest.approx((1 / L3 + 1 / L5) / idcg3)  # ideal@5 has only 3 gains
    assert m["map_at_5"] == pytest.approx((1 / 2 + 2 / 4) / 3)
    assert m["mrr"] == pytest.approx(0.5)
    assert set(m) == set(metric_names([1, 3, 5]))


def test_graded_hand_worked() -> None:
    # grades: a=1, b=0 (judged non-relevant), c=3, d=2 (not retrieved)
    m = retrieval_metrics(["a", "b", "c"], {"a": 1, "b": 0, "c": 3, "d": 2}, [1, 3])
    assert m["ndcg_at_1"] == pytest.approx(1 / 3)  # dcg 1 vs ideal 3
    dcg3 = 1 / L2 + 0 + 3 / 2
    idcg3 = 3 + 2 / L3 + 1 / 2
    assert m["ndcg_at_3"] == pytest.approx(dcg3 / idcg3)
    assert m["recall_at_3"] == pytest.approx(2 / 3)  # relevance is grade >= 1, grades ignored
    assert m["precision_at_3"] == pytest.approx(2 / 3)
    assert m["map_at_3"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert m["mrr"] == 1.0 and m["hit_at_1"] == 1.0


def test_precision_divides_by_k_even_when_fewer_retrieved() -> None:
    m = retrieval_metrics(["x"], {"x": 1}, [10])
    assert m["precision_at_10"] == pytest.approx(0.1)
    assert m["recall_at_10"] == 1.0 and m["ndcg_at_10"] == 1.0 and m["map_at_10"] == 1.0


def test_mrr_at_k_cuts_but_mrr_does_not() -> None:
    m = retrieval_metrics(["a", "b", "c", "d"], {"d": 2}, [3])
    assert m["mrr_at_3"] == 0.0 and m["hit_at_3"] == 0.0
    assert m["mrr"] == pytest.approx(0.25)


def test_no_relevant_ids_gives_zeros_and_is_flagged() -> None:
    qrels = {"a": 0}
    assert not has_relevant(qrels) and not has_relevant({})
    assert has_relevant({"a": 0, "b": 2})
    m = retrieval_metrics(["a", "b"], qrels, [1, 5])
    assert all(v == 0.0 for v in m.values())


def test_empty_ranking() -> None:
    m = retrieval_metrics([], {"a": 1}, [1, 5])
    assert all(v == 0.0 for v in m.values())


def test_duplicates_and_bad_k_raise() -> None:
    with pytest.raises(RagbenchError, match="repeats id 'a'"):
        retrieval_metrics(["a", "b", "a"], {"a": 1}, [1])
    with pytest.raises(RagbenchError, match="k=0"):
        retrieval_metrics(["a"], {"a": 1}, [0])


def _random_case(rng: random.Random, graded: bool) -> tuple[list[str], dict[str, int]]:
    pool = [f"d{i:03d}" for i in range(rng.randint(3, 40))]
    n_judged = rng.randint(0, len(pool))
    judged = rng.sample(pool, n_judged)
    qrels = {d: (rng.randint(0, 3) if graded else rng.randint(0, 1)) for d in judged}
    ranked = rng.sample(pool, rng.randint(0, len(pool)))
    return ranked, qrels


@pytest.mark.parametrize("graded", [False, True])
def test_agrees_with_pytrec_eval(graded: bool) -> None:
    rng = random.Random(1234 + graded)
    ks = [1, 3, 5, 10, 20]
    cut = ",".join(map(str, ks))
    measures = {
        f"success.{cut}",
        f"recall.{cut}",
        f"P.{cut}",
        f"ndcg_cut.{cut}",
        f"map_cut.{cut}",
        "recip_rank",
    }
    names = {"hit": "success", "recall": "recall", "precision": "P", "ndcg": "ndcg_cut", "map": "map_cut"}
    n_queries = 300
    cases = {f"q{i}": _random_case(rng, graded) for i in range(n_queries)}
    qrels_all = {q: dict(qrels) for q, (_, qrels) in cases.items()}
    # Strictly decreasing scores: trec_eval sorts by score, then by doc id, so ties would reorder.
    run = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, (r, _) in cases.items()}
    ref = pytrec_eval.RelevanceEvaluator(qrels_all, measures).evaluate(run)
    checked = skipped = 0
    for q, (ranked, qrels) in cases.items():
        ours = retrieval_metrics(ranked, qrels, ks)
        if not qrels:  # pytrec_eval drops queries without judgments; we document 0.0
            assert q not in ref and all(v == 0.0 for v in ours.values())
            skipped += 1
            continue
        theirs = ref[q]
        for k in ks:
            for mine, trec in names.items():
                assert ours[f"{mine}_at_{k}"] == pytest.approx(theirs[f"{trec}_{k}"], abs=1e-9), (q, mine, k)
                checked += 1
            # trec_eval has no cut recip_rank: MRR@k is recip_rank of the run truncated at k.
            short = {q: {d: s for d, s in run[q].items() if s > len(ranked) - k}}
            rr = pytrec_eval.RelevanceEvaluator({q: qrels}, {"recip_rank"}).evaluate(short)
            assert ours[f"mrr_at_{k}"] == pytest.approx(rr[q]["recip_rank"], abs=1e-9), (q, k)
        assert ours["mrr"] == pytest.approx(theirs["recip_rank"], abs=1e-9), q
    assert checked == (n_queries - skipped) * len(ks) * len(names) and skipped < 30
