"""Query transforms, variant fusion, the frequency reranker, reranker fallback and the trace, on
hand-worked examples (no model, no LLM: the LLM transforms get a scripted client)."""

from __future__ import annotations

import pytest

from ragbench.errors import ConfigError, ModelLoadError
from ragbench.query.plan import QueryPlan, plan_queries
from ragbench.query.rules import answer_type, entities, expand, keywords
from ragbench.query.transforms import (
    HyDE,
    MultiQuery,
    NoQueryTransform,
    RuleExpansion,
    check_transform,
    parse_subqueries,
)
from ragbench.rerank.fallback import FALLBACK_KEY, OnLoadError, fallback_count, rerank_or_keep
from ragbench.rerank.frequency import FrequencyReranker
from ragbench.retrieval.bm25 import BM25Retriever
from ragbench.retrieval.dense import FaissRetriever
from ragbench.retrieval.hybrid import RRFRetriever
from ragbench.trace import branch_stages, gold_path, gold_path_tags, stage, trace_counts
from ragbench.types import Hit, Query


def q(text: str, qid: str = "q1") -> Query:
    return Query(qid=qid, text=text, answers=("x",), question_type="t")


def hits(*ids: str) -> list[Hit]:
    return [Hit(chunk_id=c, score=1.0 / r, rank=r) for r, c in enumerate(ids, start=1)]


QUESTION = 'When did Caroline go to the "LGBTQ support group" in 2023?'


def test_rules_hand_worked() -> None:
    assert keywords(QUESTION) == "Caroline go LGBTQ support group 2023"
    assert entities(QUESTION) == "LGBTQ support group Caroline LGBTQ 2023"
    assert answer_type(QUESTION) == "Caroline go LGBTQ support group 2023 date time"
    assert expand(QUESTION) == (QUESTION, keywords(QUESTION), entities(QUESTION), answer_type(QUESTION))
    assert expand("What is the dataset size?") == ("What is the dataset size?", "dataset size")  # no new text: skipped
    assert RuleExpansion().variants(q(QUESTION)) == expand(QUESTION)  # deterministic
    assert RuleExpansion(rules=["keywords"]).variants(q(QUESTION)) == (QUESTION, keywords(QUESTION))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"rules": ["synonyms"]}, "query.transform.rules=['synonyms'] names unknown rules"),
    ({"rules": []}, "use a non-empty subset"),
])
def test_rules_bad_config(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        RuleExpansion(**kwargs)


class Client:
    """A scripted LLM client: replies in order; an Exception item is raised."""

    model = "scripted"
    max_concurrency = 1

    def __init__(self, *replies: object) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def complete(self, messages):  # noqa: ANN001
        self.prompts.append(messages[-1]["content"])
        item = self.replies.pop(0)
        if isinstance(item, Exception):
            raise item
        return type("Reply", (), {"text": item})()


def test_multi_query_parses_and_counts_failures() -> None:
    mq = MultiQuery(client=Client("1. where Caroline went\n- Caroline support group\n\n3) where Caroline went\nextra",
                                  TimeoutError("down")), n=2)
    assert mq.variants(q("Q?")) == ("Q?", "where Caroline went", "Caroline support group")
    assert "Write 2 different search queries" in mq.client.prompts[0] and "Question: Q?" in mq.client.prompts[0]
    assert mq.variants(q("Q2?")) == ("Q2?",) and mq.failures == 1  # the question alone, counted
    assert parse_subqueries("Q", "Q\nq\n  \n", 3) == ("Q",)  # the question repeated is not a sub-query
    with pytest.raises(ConfigError, match="query.transform.n=0"):
        MultiQuery(client=Client(), n=0)


def test_hyde_searches_the_passage_and_refuses_lexical() -> None:
    hyde = HyDE(client=Client("Caroline  went on\n7 May.", ""))
    assert hyde.variants(q("When?")) == ("Caroline went on 7 May.",)
    assert hyde.variants(q("When?")) == ("When?",)  # an empty reply searches the question
    check_transform(hyde, FaissRetriever())
    for retriever in (BM25Retriever(), RRFRetriever(children=[FaissRetriever(), BM25Retriever()])):
        with pytest.raises(ConfigError, match=r"query=hyde .* lexical part \(BM25Retriever\).*retrieval=dense"):
            check_transform(hyde, retriever)
    check_transform(NoQueryTransform(), BM25Retriever())


def test_plan_fuses_variants_by_rrf_and_counts_votes() -> None:
    plan = QueryPlan(variants=(("a?",), ("b?", "b1", "b2")), k_rrf=1.0)
    assert plan.texts == ["a?", "b?", "b1", "b2"] and plan.starts == [0, 1]
    flat = [hits("x", "y"), hits("c1", "c2"), hits("c2", "c3"), hits("c2")]
    fused, votes = plan.fuse(flat, k=3)
    assert fused[0] == hits("x", "y")  # one variant: unchanged
    # c2: 1/(1+2) + 1/(1+1) + 1/(1+1) = 1.333; c1: 1/2; c3: 1/3
    assert [h.chunk_id for h in fused[1]] == ["c2", "c1", "c3"]
    assert fused[1][0].score == pytest.approx(1 / 3 + 1 / 2 + 1 / 2)
    assert votes[1] == {"c1": 1, "c2": 3, "c3": 1}
    assert plan_queries(NoQueryTransform(), [q("a?")]).texts == ["a?"]  # query=none: the question itself


def test_frequency_reranker_orders_by_votes_stably() -> None:
    got = FrequencyReranker().rerank(q("?"), hits("a", "b", "c", "d"), tree=None, k=3,  # type: ignore[arg-type]
                                     votes={"c": 3, "b": 2, "d": 2})
    assert [(h.chunk_id, h.rank) for h in got] == [("c", 1), ("b", 2), ("d", 3)]  # b before d: fused order
    same = FrequencyReranker().rerank(q("?"), hits("a", "b"), tree=None, k=5, votes={})  # type: ignore[arg-type]
    assert [h.chunk_id for h in same] == ["a", "b"]  # one variant: EasyRAG skips it, order kept


class Broken:
    needs_vectors = False

    def rerank(self, query, hits, **kw):  # noqa: ANN001, ANN003
        raise RuntimeError("CUDA out of memory")


def test_reranker_fallback_keeps_order_and_records() -> None:
    trace: dict = {}
    got = rerank_or_keep(Broken(), q("?"), hits("a", "b", "c"), trace, k=2, tree=None)  # type: ignore[arg-type]
    assert [(h.chunk_id, h.rank) for h in got] == [("a", 1), ("b", 2)]
    assert trace[FALLBACK_KEY] == [{"reranker": "Broken", "error": "RuntimeError: CUDA out of memory"}]
    assert fallback_count([trace, {}, {FALLBACK_KEY: []}]) == 1


class Unloadable(OnLoadError):
    """A reranker whose weights cannot load (as the cross-encoder's ``_load`` with a missing folder)."""

    needs_vectors = False
    model = "/nonexistent/path"

    def __init__(self, on_load_error: str) -> None:
        self.set_on_load_error("reranker.rerankers.unloadable.on_load_error", on_load_error)
        self.loads = 0

    def _load(self) -> None:
        self.loads += 1
        raise ModelLoadError(f"could not load cross-encoder '{self.model}'")

    def rerank(self, query, hits, **kw):  # noqa: ANN001, ANN003
        self.skipped_check()
        return self._load()


def test_unloadable_reranker_fails_up_front_or_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ModelLoadError, match="nonexistent"):
        Unloadable("fail").preflight()  # the default: the job fails once, before any case
    skipped = Unloadable("fallback")
    skipped.preflight()
    assert [r.getMessage() for r in caplog.records if "/nonexistent/path" in r.getMessage()] and len(caplog.records) == 1
    traces: list[dict] = [{}, {}, {}]
    for i, trace in enumerate(traces):
        got = rerank_or_keep(skipped, q("?", f"q{i}"), hits("a", "b", "c"), trace, k=2, tree=None)  # type: ignore[arg-type]
        assert [(h.chunk_id, h.rank) for h in got] == [("a", 1), ("b", 2)]
        assert trace[FALLBACK_KEY][0]["reranker"] == "Unloadable"
    assert fallback_count(traces) == 3 and skipped.loads == 1  # loaded once; one warning, none per case
    assert len(caplog.records) == 1


@pytest.mark.parametrize("value", ["skip", "", "FAIL"])
def test_on_load_error_bad_values(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^reranker.rerankers.unloadable.on_load_error=.* choose one of \['fail', 'fallback'\]"):
        Unloadable(value)


def test_trace_gold_path_hand_worked() -> None:
    gold = {"g"}
    stages = [stage("query:0", hits("a"), gold), stage("query:1", hits("g"), gold), stage("retrieval", hits("a", "g"), gold),
              stage("rerank:DiversityReranker", hits("a"), gold), stage("topk", hits("a"), gold)]
    assert gold_path(stages) == {"gold_entered": "query:1", "gold_lost": "rerank:DiversityReranker"}
    kept = [stage("retrieval", hits("g"), gold), stage("topk", hits("g"), gold)]
    assert gold_path(kept) == {"gold_entered": "retrieval", "gold_lost": None}
    assert gold_path([stage("retrieval", hits("a"), gold)]) == {"gold_entered": None, "gold_lost": None}
    traces = [gold_path(stages), gold_path(kept), {"gold_entered": None, "gold_lost": None}, {}]
    assert trace_counts(traces) == {"trace/gold_lost_at/rerank": 1.0, "trace/gold_kept": 1.0,
                                    "trace/gold_never_retrieved": 1.0}
    assert gold_path_tags(traces) == {"ragbench.trace.gold_entered_at": "query:1 (1 of 3 cases)",
                                      "ragbench.trace.gold_lost_at": "rerank:DiversityReranker (1 of 3 cases)"}
    assert gold_path_tags([gold_path(kept)] * 2) == {"ragbench.trace.gold_entered_at": "retrieval (2 of 2 cases)",
                                                     "ragbench.trace.gold_lost_at": "none (0 of 2 cases)"}
    assert gold_path_tags([{}, {}]) == {}  # trace off: no tags


def test_branch_stages_name_children_and_variants() -> None:
    one = branch_stages([hits("a")], [[("FaissRetriever", hits("a")), ("BM25Retriever", hits("b"))]])
    assert [n for n, _ in one] == ["child:FaissRetriever", "child:BM25Retriever"]
    two = branch_stages([hits("a"), hits("b")], [[("FaissRetriever", hits("a"))], [("FaissRetriever", hits("b"))]])
    assert [n for n, _ in two] == ["child:FaissRetriever@query:0", "query:0", "child:FaissRetriever@query:1", "query:1"]
    # a child ranking holding gold that fusion then drops: entered at the child, lost at retrieval
    gold = {"g"}
    stages = [stage("child:BM25Retriever", hits("g"), gold), stage("retrieval", hits("a"), gold)]
    assert gold_path(stages) == {"gold_entered": "child:BM25Retriever", "gold_lost": "retrieval"}
