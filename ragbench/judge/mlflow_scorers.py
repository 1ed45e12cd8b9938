"""MlflowScorerJudge (``judge=mlflow judge.scorers=[RetrievalGroundedness,Correctness,...]``): MLflow's
GenAI scorers (``mlflow.genai.scorers``: a built-in by its class name, or a dotted path ``pkg.module:obj``
to a scorer object: a ``@scorer`` function, a configured built-in) run on each case ragbench judged.

Each scorer gets what ``mlflow.genai.evaluate`` would give it (what its signature takes, as ``Scorer.run``):
``inputs`` ``{"question": ...}``, ``outputs`` the answer, ``expectations`` (``expected_response``: the gold
answer(s); ``expected_retrieved_context``: the gold evidence, ``[{content, doc_uri}]``; a ``dataset=mlflow``
record's own expectations as they are), and ``trace``: one in-memory trace per case (not logged: a
``CHAIN`` root with the question and answer, one ``RETRIEVER`` span whose documents are the passages the
generator read), which the retrieval scorers (``RetrievalGroundedness``, ``RetrievalRelevance``,
``RetrievalSufficiency``) read.

Each scorer's value is the metric ``judge/mlflow/<scorer name>`` (``METRICS``): MLflow's own reading of it,
as ``mlflow.genai.evaluate`` aggregates (``yes`` 1, ``no`` 0 -- yes is the pass for every built-in --, a bool
1/0, a number as it is; a list of feedbacks, one per passage or retrieval span, their mean), higher is better.
A scorer whose number is better low is named in ``lower_is_better``: its key is then
``judge/mlflow_lower/<name>``, a diagnostic. A feedback with an error, or a value that is none of these, is a
failed judgment: ``judge/mlflow/<name>/judge_failed`` = 1, the score absent. The rationale of each
feedback goes into the case record (``judge_notes``).

The LLM of the LLM scorers is the judge endpoint of ragbench (``judge.model``, ``judge.api_base``...), reached
through a LiteLLM custom provider: MLflow sends its requests to the model URI ``ragbench:/<id>`` (its LiteLLM
adapter), and each one goes through ragbench's ``LLMClient`` -- the reply cache, the budget, the
accounting, the retries. MLflow's structured-output request (``response_format``) is not passed on: its
prompts ask for JSON.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragbench.errors import BudgetExhaustedError, ConfigError, LLMError
from ragbench.judge.asking import asking_endpoint
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.llm.loader import litellm
from ragbench.metric_info import MetricInfo
from ragbench.types import Answer, Context, Query

if TYPE_CHECKING:
    from ragbench.llm.client import LLMClient

PREFIX = "judge/mlflow"
LOWER = "judge/mlflow_lower"
PROVIDER = "ragbench"
EXPECTATIONS_META = "mlflow_expectations"  # a dataset=mlflow question's own expectations (JSON)
# session-level and tool-call scorers judge conversations or agents, not one RAG answer
NOT_PER_CASE = ("Conversation", "KnowledgeRetention", "UserFrustration", "ToolCall")

METRICS = {
    f"{PREFIX}/<name>": MetricInfo(
        "an MLflow scorer's verdict on the case (judge.scorers): yes 1, no 0, a bool 1/0, a number as it "
        "is; a list of verdicts (one per passage or retrieval span) their mean",
        "MLflow GenAI scorers (mlflow.genai.scorers), e.g. RetrievalGroundedness, Correctness",
        "per case on ragbench's own outputs and an in-memory trace, the LLM through ragbench's judge "
        "endpoint; the job figure counts a failed case 0, where mlflow.genai.evaluate leaves it out"),
    f"{LOWER}/<name>": MetricInfo(
        "an MLflow scorer's number on the case, better low (judge.lower_is_better)",
        "a user-defined MLflow scorer (judge.scorers)", higher_is_better=False, kind="diagnostic"),
    f"{PREFIX}/<name>/judge_failed": MetricInfo(
        "1 when the scorer gave no usable verdict for the case (an error, or a value that is not yes/no, a "
        "bool or a number); its score is then absent", "ragbench", higher_is_better=False, kind="diagnostic"),
}

_clients: weakref.WeakValueDictionary[str, LLMClient] = weakref.WeakValueDictionary()
_clients_lock = threading.Lock()


def _handler() -> Any:
    """LiteLLM's custom provider ``ragbench``: a request for model ``ragbench/<id>`` answered by the
    ``LLMClient`` registered under ``<id>`` (the judge endpoint of one ``MlflowScorerJudge``)."""
    lib = litellm()

    class RagbenchProvider(lib.CustomLLM):  # type: ignore[name-defined]
        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            client = _clients.get(model.split("/", 1)[-1])
            if client is None:
                raise LLMError(f"no ragbench judge endpoint is registered as {model}")
            plain = [{"role": str(_get(m, "role")), "content": str(_get(m, "content") or "")}
                     for m in messages]
            reply = client.complete(plain)
            used = reply.usage
            usage = {"prompt_tokens": used.prompt_tokens, "completion_tokens": used.completion_tokens,
                     "total_tokens": used.prompt_tokens + used.completion_tokens}
            return lib.ModelResponse(model=reply.model, usage=usage,
                                     choices=[{"message": {"role": "assistant", "content": reply.text},
                                               "finish_reason": "stop", "index": 0}])

    return RagbenchProvider()


def _get(message: Any, key: str) -> Any:
    return message.get(key) if isinstance(message, Mapping) else getattr(message, key, None)


def model_uri(client: LLMClient) -> str:
    """The model URI MLflow's scorers reach ``client`` by, once ``register``-ed: ``ragbench:/<id>``."""
    return f"{PROVIDER}:/" + hashlib.sha256(f"{id(client)}:{client.model}".encode()).hexdigest()[:12]


def register(client: LLMClient) -> None:
    """``client`` reachable at ``model_uri(client)``; LiteLLM's ``ragbench`` provider added once."""
    lib = litellm()
    with _clients_lock:
        _clients[model_uri(client).split("/", 1)[-1]] = client
        providers = list(getattr(lib, "custom_provider_map", None) or [])
        if not any(p.get("provider") == PROVIDER for p in providers):
            mine = {"provider": PROVIDER, "custom_handler": _handler()}
            setattr(lib, "custom_provider_map", [*providers, mine])  # noqa: B010 - litellm's, typed as absent
            lib.utils.custom_llm_setup()


def builtin_names() -> list[str]:
    """MLflow's built-in scorers that judge one answer (by class name)."""
    from mlflow.genai.scorers import get_all_scorers

    names = (type(s).__name__ for s in get_all_scorers())
    return sorted(n for n in names if not any(n.startswith(p) for p in NOT_PER_CASE))


def _key_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def resolve_scorer(spec: str, model: str | None) -> Any:
    """The scorer ``spec`` names: a built-in class name (built with ``model`` when it takes one), or a dotted
    path to a scorer object (a built-in without a model gets ``model``). Else a one-line ConfigError listing
    the built-in scorers."""
    from mlflow.genai.scorers import Scorer, builtin_scorers

    names = builtin_names()
    cls: Any = getattr(builtin_scorers, spec, None) if spec.isidentifier() else None
    if (isinstance(cls, type) and issubclass(cls, builtin_scorers.BuiltInScorer)
            and not inspect.isabstract(cls) and not any(spec.startswith(p) for p in NOT_PER_CASE)):
        try:
            make: Any = cls
            return make(model=model) if model and "model" in cls.model_fields else make()
        except Exception as exc:  # noqa: BLE001 - a built-in that needs arguments: one line
            raise ConfigError(f"judge.scorers: {spec} needs arguments ({type(exc).__name__}); fix: build "
                              f"it in your own module (e.g. {spec}(...)) and name it as "
                              "pkg.module:obj") from None
    module, _, attr = spec.partition(":") if ":" in spec else spec.rpartition(".")
    obj = None
    if module and attr:
        try:
            obj = getattr(importlib.import_module(module), attr, None)
        except ImportError:
            obj = None
    if not isinstance(obj, Scorer):
        what = "is not an MLflow built-in scorer" if not module else "names no MLflow scorer object"
        raise ConfigError(f"judge.scorers: {spec!r} {what}; built-in: {', '.join(names)}; or a dotted path "
                          "to a @scorer (pkg.module:obj)")
    if model and "model" in getattr(type(obj), "model_fields", {}) and getattr(obj, "model", None) is None:
        obj = obj.model_copy(update={"model": model})
    return obj


def expectations(query: Query) -> dict[str, Any]:
    """What MLflow's scorers read as the case's expectations: a ``dataset=mlflow`` record's own, else the
    gold answer(s) and the gold evidence."""
    own = query.meta.get(EXPECTATIONS_META)
    if isinstance(own, str) and own:
        return dict(json.loads(own))
    out: dict[str, Any] = {}
    if query.answers:
        out["expected_response"] = query.answers[0] if len(query.answers) == 1 else list(query.answers)
    context = [{k: v for k, v in (("content", ev.text), ("doc_uri", ev.doc_id)) if v}
               for ev in query.evidence]
    if any(context):
        out["expected_retrieved_context"] = [c for c in context if c]
    return out


def case_trace(query: Query, contexts: Sequence[Context], answer: Answer) -> Any:
    """One case as an MLflow trace, in memory only: a ``CHAIN`` root (the question in, the answer out) and one
    ``RETRIEVER`` span whose documents are the passages the generator read (``doc_uri`` its chunk id)."""
    from mlflow.entities import Trace

    seed = hashlib.sha256(f"{query.qid}\0{query.text}".encode()).digest()
    trace_id, root_id, span_id = seed[:16].hex(), seed[16:24].hex(), seed[24:32].hex()
    request_id = f"tr-{trace_id}"
    docs = [{"page_content": c.text, "metadata": {"doc_uri": c.chunk_id, "chunk_id": c.chunk_id},
             "id": c.chunk_id} for c in contexts]

    def span(name: str, sid: str, parent: str | None, kind: str, inputs: Any, outputs: Any) -> dict[str, Any]:
        return {"trace_id": trace_id, "span_id": sid, "parent_span_id": parent, "name": name,
                "start_time_unix_nano": 1, "end_time_unix_nano": 2, "events": [], "links": [],
                "status": {"code": "STATUS_CODE_OK", "message": ""},
                "attributes": {"mlflow.traceRequestId": json.dumps(request_id),
                               "mlflow.spanType": json.dumps(kind), "mlflow.spanInputs": json.dumps(inputs),
                               "mlflow.spanOutputs": json.dumps(outputs)}}

    inputs = {"question": query.text}
    return Trace.from_dict({
        "info": {"trace_id": request_id, "request_time": "1970-01-01T00:00:00Z", "state": "OK",
                 "trace_location": {"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": "0"}},
                 "trace_metadata": {"mlflow.traceInputs": json.dumps(inputs),
                                    "mlflow.traceOutputs": json.dumps(answer.text),
                                    "mlflow.trace_schema.version": "3"},
                 "tags": {}, "execution_duration_ms": 0},
        "data": {"spans": [span("rag", root_id, None, "CHAIN", inputs, answer.text),
                           span("retrieve", span_id, root_id, "RETRIEVER", {"query": query.text}, docs)]},
    })


def verdicts(result: Any) -> tuple[float | None, list[str]]:
    """A scorer's return as one number (None: no usable verdict) and its rationales (or errors)."""
    items = result if isinstance(result, list) else [result]
    values: list[float] = []
    notes: list[str] = []
    for item in items:
        value, error = getattr(item, "value", item), getattr(item, "error", None)
        if getattr(item, "rationale", None):
            notes.append(str(item.rationale))
        if error is not None:
            notes.append(f"error: {getattr(error, 'error_message', None) or error}")
            return None, notes
        number = _number(value)
        if number is None:
            notes.append(f"not a verdict: {value!r}"[:200])
            return None, notes
        values.append(number)
    return (sum(values) / len(values) if values else None), notes


def _number(value: Any) -> float | None:
    text = str(getattr(value, "value", value)).strip().lower()
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return {"yes": 1.0, "no": 0.0}.get(text)


def call(scorer: Any, given: Mapping[str, Any]) -> Any:
    """``scorer`` called with what its signature takes of ``given``, as ``Scorer.run`` does, but in this
    thread: ``run`` moves the call to a thread of its own (its timeout), where ragbench's wave (``llm.batch``,
    a local model), which follows each case's requests by thread, would not see it."""
    taken = inspect.signature(scorer.__call__).parameters
    return scorer(**{k: v for k, v in given.items() if k in taken})


def _cause(exc: BaseException) -> BaseException | None:
    """A budget stop or an LLM failure of ragbench's behind a scorer's exception (MLflow wraps them)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BudgetExhaustedError | LLMError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class MlflowScorerJudge:
    """Satisfies ``ragbench.protocols.Judge`` (and ExplainingJudge: its verdicts are cached per case, the
    rationales kept in the case record). See the module docstring."""

    def __init__(self, *, endpoint: LLMEndpoint | None = None, scorers: Sequence[str] = ("Correctness",),
                 lower_is_better: Sequence[str] = (), **settings: Any) -> None:
        if not scorers or isinstance(scorers, str):
            raise ConfigError(f"judge.scorers={scorers!r} is not valid; give a list, e.g. "
                              "judge.scorers=[RetrievalGroundedness,Correctness]")
        ep = asking_endpoint("mlflow", endpoint, settings, 0)
        self.model = str(ep.model)
        self.client = ep.client()
        self.specs = tuple(dict.fromkeys(str(s) for s in scorers))
        self.lower = frozenset(str(s) for s in lower_is_better)
        self._registered = False
        uri = model_uri(self.client)
        built = [resolve_scorer(spec, uri) for spec in self.specs]
        self._scorers = [(f"{LOWER if {spec, b.name} & self.lower else PREFIX}/{_key_name(b.name)}", b)
                         for spec, b in zip(self.specs, built, strict=True)]
        self.score_keys = tuple(key for key, _ in self._scorers if key.startswith(f"{PREFIX}/"))
        sources = hashlib.sha256("\0".join(_source(s) for s in self.specs).encode()).hexdigest()[:16]
        self.identity = (f"mlflow-scorers:{self.model}(scorers={','.join(self.specs)},source={sources},"
                         f"temperature={ep.temperature},max_tokens={ep.max_tokens})")

    def scorers(self) -> list[tuple[str, Any]]:
        """(metric key, scorer) of every configured scorer; the judge endpoint registered for them on first
        use (it imports LiteLLM)."""
        if not self._registered:
            register(self.client)
            self._registered = True
        return self._scorers

    def log_params(self) -> dict[str, Any]:
        return {"judge/mlflow/scorers": ",".join(self.specs)}

    def log_tags(self) -> dict[str, str]:
        return {"judge.mlflow.model": self.model}

    def preflight(self) -> None:
        """The judge endpoint contacted once, when a scorer asks a model (a code scorer asks none)."""
        if any("model" in getattr(type(s), "model_fields", {}) for _, s in self.scorers()):
            self.client.preflight()

    def judge(self, query: Query, contexts: Sequence[Context], answer: Answer) -> dict[str, float]:
        return self.judge_notes(query, contexts, answer)[0]

    def judge_notes(self, query: Query, contexts: Sequence[Context],
                    answer: Answer) -> tuple[dict[str, float], dict[str, Any]]:
        """Every scorer's verdict on the case, and per scorer its rationales."""
        trace = case_trace(query, contexts, answer)
        given = {"inputs": {"question": query.text}, "outputs": answer.text,
                 "expectations": expectations(query), "trace": trace}
        scores: dict[str, float] = {}
        notes: dict[str, Any] = {}
        for key, scorer in self.scorers():
            try:
                value, why = verdicts(call(scorer, given))
            except Exception as exc:  # noqa: BLE001 - a scorer's failure is a failed judgment; a stop is not
                stop = _cause(exc)
                if stop is not None:
                    raise stop from None
                value, why = None, [f"error: {type(exc).__name__}: {str(exc)[:300]}"]
            notes[scorer.name] = why
            if value is not None:
                scores[key] = value
            scores[f"{PREFIX}/{_key_name(scorer.name)}/judge_failed"] = float(value is None)
        return scores, notes


def _source(spec: str) -> str:
    """What a verdict depends on beyond the spec: a dotted scorer's source code (a built-in: the spec)."""
    if ":" not in spec and "." not in spec:
        return spec
    module = spec.partition(":")[0] if ":" in spec else spec.rpartition(".")[0]
    try:
        return spec + inspect.getsource(importlib.import_module(module))
    except (ImportError, OSError, TypeError):
        return spec
