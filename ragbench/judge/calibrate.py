"""A judge configuration scored against human labels: per item verdicts, agreement per rubric, bias probes.

Each labelled item is judged once as given; the judge's normalised 0-1 score on the label's key
(``judge/<rubric>`` unless ``keys`` maps it elsewhere) becomes a verdict on the labels' scale:
``scale=binary`` passes at ``pass_at`` (0.75 = 3 of 4), ``scale=rubric`` rounds to the rubric's
0..``max_score``. A judgment the judge could not give (its key absent, or its call failed after the
retries) is a failed verdict, counted as the lowest class -- as ragbench scores a failed judgment 0
-- and counted in ``calibration/<rubric>/judge_failed``. Stage code: no MLflow here (``__main__``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ragbench.cache import keys
from ragbench.cache.entries import verdict_with_notes
from ragbench.errors import ConfigError, JobFailedError, LLMError
from ragbench.judge.aggregate import metric_name
from ragbench.judge.agreement import Agreement, Interval, agreement
from ragbench.judge.calibration_settings import Settings
from ragbench.judge.labels import LabelledItem, LabelSet
from ragbench.judge.probes import ProbeResult, Scorer, run_probe
from ragbench.llm.errors import LLMCircuitOpenError
from ragbench.metric_info import MetricInfo
from ragbench.protocols import ExplainingJudge, Judge
from ragbench.types import Answer, Context

log = logging.getLogger(__name__)
USAGE_SUFFIXES = ("_tokens", "cost_usd")  # summed over a case's judges and over the items


@dataclass(frozen=True)
class Calibration:
    """Everything a calibration run logs: per-item rows, agreement per rubric and the probes."""

    rows: tuple[dict[str, Any], ...]
    agreements: Mapping[str, Agreement]
    probes: Mapping[str, ProbeResult]
    failed: Mapping[str, int]
    usage: Mapping[str, float]

    def metrics(self) -> dict[str, float]:
        """Flat MLflow metrics: ``calibration/<rubric>/{accuracy,kappa}`` with ``_ci_low``/``_ci_high``,
        ``n``, ``judge_failed``, ``by_type/<type>/calibration/<rubric>/...`` and ``probe/<name>/<stat>``."""
        out: dict[str, float] = dict(self.usage)
        for rubric, agr in self.agreements.items():
            base = f"calibration/{metric_name(rubric)}"
            out[f"{base}/n"] = agr.n
            out[f"{base}/judge_failed"] = self.failed.get(rubric, 0) / agr.n
            for name, interval in (("accuracy", agr.accuracy), ("kappa", agr.kappa)):
                out.update(_interval(f"{base}/{name}", interval))
            for t, ta in agr.by_type.items():
                out[f"by_type/{metric_name(t)}/{base}/n"] = ta.n
                out[f"by_type/{metric_name(t)}/{base}/accuracy"] = ta.accuracy
                out[f"by_type/{metric_name(t)}/{base}/kappa"] = ta.kappa
        for name, result in self.probes.items():
            out[f"probe/{name}/n"] = result.n
            for stat, interval in result.stats.items():
                out.update(_interval(f"probe/{name}/{stat}", interval))
        return {k: float(v) for k, v in out.items() if not math.isnan(float(v))}

    def summary(self) -> dict[str, Any]:
        """A JSON-ready document (``calibration.json``): agreements with their confusion matrices, probes."""
        return {
            "agreement": {r: {"n": a.n, "classes": list(a.classes), "confusion": [list(x) for x in a.confusion],
                              "confusion_axes": "rows: human label, columns: judge verdict",
                              "accuracy": vars(a.accuracy), "kappa": vars(a.kappa),
                              "judge_failed": self.failed.get(r, 0),
                              "by_type": {t: vars(x) for t, x in a.by_type.items()}}
                          for r, a in self.agreements.items()},
            "probes": {n: {"n": p.n, "definition": p.definition,
                           "stats": {s: vars(i) for s, i in p.stats.items()}, "note": p.note}
                       for n, p in self.probes.items()},
        }


_CAL = "calibration of a judge rubric against human labels (python -m ragbench.judge calibrate)"
_CI = "; _ci_low / _ci_high: its bootstrap confidence interval"


def _calibration(definition: str, *, lower: bool = False, unit: str = "") -> MetricInfo:
    return MetricInfo(definition, _CAL, higher_is_better=not lower, kind="diagnostic",
                      job_level="over the labelled items", unit=unit)


# Calibration.metrics' keys (also per question type: by_type/<type>/calibration/...)
METRICS = {
    "calibration/<name>/agree": MetricInfo("1 when the judge's verdict equals the human label (an item of the "
                                           "calibration's case record)", _CAL, kind="diagnostic"),
    "calibration/<name>/n": _calibration("labelled items the rubric was checked on", unit="count"),
    "calibration/<name>/judge_failed": _calibration("share of the items the judge gave no verdict", lower=True),
    **{f"calibration/<name>/{stat}{ci}": _calibration(f"{text}{_CI}")
       for stat, text in (("accuracy", "share of the items whose verdict equals the human label"),
                          ("kappa", "Cohen's kappa of the verdicts and the human labels"))
       for ci in ("", "_ci_low", "_ci_high")},
    "probe/<name>/n": _calibration("items a probe (a perturbation of the answers) was run on", unit="count"),
    "probe/<name>/<name>": _calibration("a probe's statistic (how the verdicts moved under the perturbation)" + _CI),
}


def _interval(key: str, interval: Interval) -> dict[str, float]:
    return {key: interval.value, f"{key}_ci_low": interval.low, f"{key}_ci_high": interval.high}


def make_scorer(judges: Mapping[str, Any], cache: Any = None) -> Scorer:
    """One call judging an (item, contexts, answer) with every judge: merged scores, or None when a
    judge's call failed after its retries (an open circuit still stops the run). A model judge's
    verdict is a stage record of ``cache`` (a ``StageCache``), keyed as a job's verdicts are plus the
    label set's ``ask`` number (the repeat probe asks again): a rerun sends no request it already made."""
    def one(judge: Any, item: LabelledItem, contexts: Sequence[Context], answer: Answer, ask: int) -> dict[str, float]:
        query = item.query()
        if cache is None or not isinstance(judge, ExplainingJudge):
            return dict(judge.judge(query, contexts, answer))
        key = keys.verdict_key(f"{judge.identity}#ask={ask}", keys.answer_key("calibration", query, contexts),
                               answer, query)
        hit = cache.get_record("verdicts", key, parse=verdict_with_notes)
        if hit is not None:
            return dict(hit[0])
        scores, _ = judge.judge_notes(query, contexts, answer)
        if not any(k.endswith("judge_failed") and v for k, v in scores.items()):
            cache.put_record("verdicts", key, {"judge": judge.identity, "qid": query.qid, "ask": ask}, scores)
        return scores

    def score(item: LabelledItem, contexts: Sequence[Context], answer: Answer, ask: int = 0) -> dict[str, float] | None:
        out: dict[str, float] = {}
        for name, judge in judges.items():
            try:
                scores = one(judge, item, contexts, answer, ask)
            except LLMCircuitOpenError:
                raise
            except LLMError as exc:
                log.warning("judge %s failed on %s: %s", name, item.item_id, exc)
                return None
            for key, value in scores.items():
                out[key] = out.get(key, 0.0) + value if key.endswith(USAGE_SUFFIXES) else value
        return out

    return score


def _no_verdict(rubrics: Sequence[str], given: set[str], judges: Mapping[str, Any], settings: Settings, n: int,
                judge_model: str | None) -> None:
    """A rubric a judge was asked for (``Judge.score_keys``) with not one parseable verdict is said as such:
    no agreement can be measured, and "choose a judge that scores it" would be wrong advice."""
    asked = {k for judge in judges.values() if isinstance(judge, Judge) for k in judge.score_keys}
    empty = [r for r in rubrics if settings.key(r) in asked and settings.key(r) not in given]
    if empty:
        key = settings.key(empty[0])
        model = f" ({judge_model})" if judge_model else ""
        raise JobFailedError(
            f"0 parseable verdicts: the judge{model} was asked for {key} on {n} items and not one reply held a "
            f"valid score (each was malformed or its call failed; see the warnings above), so no agreement can "
            f"be measured; fix: ask a judge model that follows the rubric's JSON format, or turn on "
            f"judge.structured_output=true where its endpoint supports response_format")


def calibrate(labels: LabelSet, judges: Mapping[str, Any], settings: Settings, *, judge_model: str | None = None,
              cache: Any = None, progress: Callable[[int, int], None] | None = None) -> Calibration:
    """Judge every item, then agreement per rubric and the probes (each a metric with its CI)."""
    if not judges:
        raise ConfigError("no judge to calibrate; fix: choose one, e.g. judge=llm or judge=[llm,reference_free]")
    labels.check_scale(settings.scale, settings.max_score)  # a label off the scale could never agree
    scorer = make_scorer(judges, cache)
    items = labels.items
    done = [0]

    def first(item: LabelledItem) -> dict[str, float] | None:
        result = scorer(item, item.context_objects(), item.answer_object())
        done[0] += 1
        if progress is not None:
            progress(done[0], len(items))
        return result

    with ThreadPoolExecutor(max_workers=settings.workers) as pool:
        base = list(pool.map(first, items))
    rubrics = labels.rubrics
    given = {k for scores in base if scores for k in scores}
    _no_verdict(rubrics, given, judges, settings, len(items), judge_model)
    missing = [r for r in rubrics if settings.key(r) not in given and any(s is not None for s in base)]
    if missing:
        raise ConfigError(f"labels file {labels.path} labels rubric {missing[0]!r}, but no chosen judge gives "
                          f"{settings.key(missing[0])!r} (the judges gave {sorted(k for k in given if not k.endswith(USAGE_SUFFIXES))})"
                          f"; fix: choose a judge that scores it (e.g. judge.metrics=[{missing[0]}]) or map it with "
                          f"keys.{missing[0]}=<judge key>")
    rows: list[dict[str, Any]] = []
    failed: dict[str, int] = {r: 0 for r in rubrics}
    usage: dict[str, float] = {}
    for item, scores in zip(items, base, strict=True):
        row: dict[str, Any] = {"qid": item.item_id, "question_type": item.question_type,
                               "status": "ok" if scores is not None else "failed", "generator": item.generator}
        for k, v in (scores or {}).items():
            if k.endswith(USAGE_SUFFIXES):
                usage[k] = usage.get(k, 0.0) + v
        for rubric, label in item.labels.items():
            score = (scores or {}).get(settings.key(rubric))
            failed[rubric] += score is None
            verdict = settings.verdict(score)
            row[f"human/{rubric}"] = label
            row[f"verdict/{rubric}"] = verdict
            row[f"calibration/{rubric}/agree"] = float(verdict == label)
            if score is not None:
                row[settings.key(rubric)] = score
        rows.append(row)
    agreements: dict[str, Agreement] = {}
    classes = (0, 1) if settings.scale == "binary" else tuple(range(settings.max_score + 1))
    for rubric in rubrics:
        labelled = [r for r in rows if f"human/{rubric}" in r]
        agreements[rubric] = agreement(rubric, [r[f"human/{rubric}"] for r in labelled],
                                       [r[f"verdict/{rubric}"] for r in labelled],
                                       [r["question_type"] for r in labelled], classes=classes,
                                       resamples=settings.resamples, seed=settings.seed, level=settings.level)
    probes: dict[str, ProbeResult] = {}
    probe_rubric = rubrics[0]
    for name in settings.probes:
        probes[name] = run_probe(name, items, base, scorer, settings=settings, rubric=probe_rubric,
                                 judge_model=judge_model, rows=rows)
    return Calibration(rows=tuple(rows), agreements=agreements, probes=probes, failed=failed, usage=usage)
