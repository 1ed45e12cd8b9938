"""The failure taxonomy reads a run's claim metrics (judge=[...,claims], after RAGChecker): why each case
answered wrong with its evidence in the context went wrong. Hand-worked cases."""

from __future__ import annotations

from ragbench.compare import taxonomy as tx
from ragbench.compare.runcases import from_rows

# top-k 3; every case but the last two has its evidence in the top 3 and in the context
_IN_CONTEXT = {"retrieval/hit_at_3": 1.0, "retrieval/hit_at_5": 1.0, "retrieval/mrr_at_10": 1.0,
               "context/evidence_text_recall": 1.0}


def _case(qid: str, f1: float, claims: dict[str, float], qtype: str = "single-hop", **extra: float) -> dict:
    fields = {**_IN_CONTEXT, "answer/f1": f1, **extra, **{f"judge/claims/{k}": v for k, v in claims.items()}}
    return {"qid": qid, "question_type": qtype, "status": "ok", **fields}


H, N, U, R = "hallucination", "noise_sensitivity", "context_utilisation", "recall"
CASES = [
    # wrong, one of its two claims in neither the gold nor the passages
    (_case("h", 0.1, {H: 0.5, N: 0.0, U: 1.0, R: 0.5}), tx.HALLUCINATED),
    # hallucination wins over missed evidence (first that applies)
    (_case("h2", 0.0, {H: 1.0, N: 0.0, U: 0.0, R: 0.0}, qtype="multi-hop"), tx.HALLUCINATED),
    # no invented claim, but a wrong one taken from a passage
    (_case("n", 0.2, {H: 0.0, N: 0.25, U: 1.0, R: 0.5}), tx.MISLED_BY_CONTEXT),
    # nothing wrong asserted; the gold's claims were in the passages and the answer left them out
    (_case("m", 0.1, {H: 0.0, N: 0.0, U: 0.0, R: 0.0}, qtype="multi-hop"), tx.MISSED_EVIDENCE),
    (_case("m2", 0.1, {H: 0.0, N: 0.0, U: 0.25, R: 0.4}), tx.MISSED_EVIDENCE),
    # utilisation low but recall high: the answer holds the gold's claims; the claims do not explain it
    (_case("u", 0.3, {H: 0.0, N: 0.0, U: 0.0, R: 1.0}), tx.UNEXPLAINED),
    # no gold claim found in the passages (no utilisation): not "missed evidence in context"
    (_case("p", 0.1, {H: 0.0, N: 0.0, R: 0.0}), tx.UNEXPLAINED),
    # wrong, but the case has no claim metric (the claim judge failed on it)
    (_case("x", 0.1, {}), None),
]
NOT_WRONG = [
    _case("r", 0.9, {H: 0.5, N: 0.5, U: 0.0, R: 0.0}),  # answered right: no cause, whatever its claims
    {**_case("k", 0.0, {H: 1.0}), "retrieval/hit_at_3": 0.0, "retrieval/hit_at_5": 0.0,
     "retrieval/mrr_at_10": 0.0},  # not retrieved: the taxonomy stops there
]


def test_each_wrong_answer_gets_its_cause_from_the_claim_metrics():
    rows = [r for r, _ in CASES] + NOT_WRONG
    run = from_rows(rows, run_id="r", name="#0 judge=[lexical,claims]", dataset="d", topk=3)
    for i, (_, cause) in enumerate(CASES):
        assert tx.classify(run, i, 3, 5)[0] == tx.ANSWERED_WRONG
        assert tx.wrong_cause(run, i) == cause, rows[i]["qid"]
    t = tx.taxonomy(run)
    assert t.counts["all"] == {tx.ANSWERED_WRONG: 8, tx.ANSWERED_RIGHT: 1, tx.NOT_RETRIEVED: 1}
    assert t.causes["all"] == {tx.HALLUCINATED: 2, tx.MISLED_BY_CONTEXT: 1, tx.MISSED_EVIDENCE: 2, tx.UNEXPLAINED: 2}
    assert t.causes["multi-hop"] == {tx.HALLUCINATED: 1, tx.MISSED_EVIDENCE: 1}
    row = next(r for r in t.json() if r["type"] == "all")
    assert row["answered_wrong"] == 8 and row["answered_wrong/hallucinated"] == 2
    assert row["answered_wrong/missed_evidence_in_context"] == 2 and row["answered_wrong/misled_by_context"] == 1
    (note,) = [n for n in t.notes if "claim" in n]
    assert note.startswith("of the 8 answered wrong with the evidence in the context, 7 have claim diagnostics: "
                           "2 hallucinated")


def test_a_run_without_claim_metrics_has_no_causes():
    rows = [_case("a", 0.1, {}), _case("b", 0.9, {})]
    t = tx.taxonomy(from_rows(rows, run_id="r", name="r", dataset="d", topk=3))
    assert t.counts["all"] == {tx.ANSWERED_WRONG: 1, tx.ANSWERED_RIGHT: 1}
    assert t.causes == {} and t.notes == ()
    assert not any(k.startswith("answered_wrong/") for r in t.json() for k in r)
