"""``python -m ragbench [-m] <overrides> plan=true [plan.json=PATH]``: the sweep's bill before it runs.

Expands the sweep with Hydra's own parser (the basic sweeper's grid), composes each job's config, and
predicts each job (``ragbench.plan.predict``) without running a stage, creating an MLflow run or
importing torch. litellm is imported only when a model to price is in the plan. Prints a table per job,
the totals, the distinct ingests and how many the stage cache holds, the cost from litellm's offline
cost map (models it does not price are named, never priced 0) and a wall time estimated from the rates
previous runs recorded (``ragbench.plan.rates``); ``plan.json=PATH`` also writes it all as JSON.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragbench import redact
from ragbench.build import build
from ragbench.errors import RagbenchError, coded
from ragbench.llm.loader import litellm
from ragbench.plan import sample_size
from ragbench.plan.predict import JobPlan, predict
from ragbench.plan.rates import llm_rate_key, read_rates
from ragbench.plan.sample_size import is_pilot_arg, split_pilot_args
from ragbench.tracking.store import os_reason

FLAGS = ("plan=true", "plan=True", "plan=1")


def split_plan_args(argv: Sequence[str]) -> tuple[bool, str | None, list[str]]:
    """(plan asked?, JSON path or None, the other arguments)."""
    asked, path, rest = False, None, []
    for arg in argv:
        if arg in FLAGS:
            asked = True
        elif arg in ("plan=false", "plan=False", "plan=0"):
            continue
        elif arg.startswith("plan.json="):
            asked, path = True, arg.split("=", 1)[1]
        elif is_pilot_arg(arg):  # plan.pilot=RUN plan.detect=0.02: questions needed (plan.sample_size)
            asked = True
            rest.append(arg)
        else:
            rest.append(arg)
    return asked, path, rest


def expand(overrides: Sequence[str]) -> list[list[str]]:
    """Every job's overrides, as Hydra's basic sweeper expands them (``a=1,2 b=x,y``: 4 jobs)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    axes = []
    for o in parsed:
        key = o.get_key_element()
        values = [f"{key}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override() else \
            [f"{key}={o.get_value_element_as_str()}"]
        axes.append(values)
    return [list(job) for job in itertools.product(*axes)]


def _price(model: str, prompt: float, completion: float) -> float | None:
    lib = litellm()
    try:
        p, c = lib.cost_per_token(model=model, prompt_tokens=int(prompt), completion_tokens=int(completion))
    except Exception:  # noqa: BLE001 - litellm raises several types for a model it does not map
        return None
    return float(p) + float(c)


def make_plan(overrides: Sequence[str]) -> dict[str, Any]:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    jobs = expand([o for o in overrides if o not in ("-m", "--multirun")])
    plans: list[JobPlan] = []
    loaded: dict[str, Any] = {}
    rates: dict[str, Any] = {}
    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        for job in jobs:
            cfg = compose(config_name="config", overrides=job)
            redact.check_config(OmegaConf.to_container(cfg, resolve=False))  # a key in the config: as a job says
            components, cache = build(cfg)
            rates = rates or read_rates(cache.dir)
            plans.append(predict(" ".join(job) or "(defaults)", components, cache, rates, loaded))
    return summarize(plans, rates)


def summarize(plans: Sequence[JobPlan], rates: dict[str, Any]) -> dict[str, Any]:
    ingests = {p.ingest: p for p in plans}
    jobs, unpriced, usd = [], set(), 0.0
    seconds, unknown = 0.0, set()
    for p in ingests.values():
        if not p.ingest_cached and p.texts_to_embed:
            rate = rates.get(p.embedder, {}).get("texts_per_s")
            if rate:
                seconds += p.texts_to_embed / rate
            else:
                unknown.add(f"encode rate of {p.embedder}")
    totals = {"questions": 0, "generation_calls": 0, "judge_calls": 0, "embedding_calls": 0, "cached_calls": 0,
              "tokens": 0.0}
    for p in plans:
        row: dict[str, Any] = {"job": p.job, "dataset": p.dataset, "baseline": p.baseline, "questions": p.questions,
                               "ingest_cached": p.ingest_cached, "exact_contexts": p.exact_contexts}
        job_usd: float | None = 0.0
        for role, bill in p.roles.items():
            row[f"{role}_calls"] = bill.calls
            row[f"{role}_cached"] = bill.cached
            row[f"{role}_tokens"] = round(bill.tokens)
            totals[f"{role}_calls"] = totals.get(f"{role}_calls", 0) + bill.calls
            totals["cached_calls"] += bill.cached
            totals["tokens"] += bill.tokens
            if bill.calls:
                cost = _price(bill.model, bill.prompt_tokens, bill.completion_tokens) if bill.model else None
                if cost is None:
                    unpriced.add(bill.model or role)
                    job_usd = None
                elif job_usd is not None:
                    job_usd += cost
                if cost is not None:
                    usd += cost
                # the rate of this role, model and prompt size only (ragbench.plan.rates.llm_rate_key)
                key = llm_rate_key(role, bill.model, bill.prompt_tokens / bill.calls)
                per_call = rates.get(key, {}).get("s_per_call")
                if per_call:
                    seconds += per_call * bill.calls
                else:
                    unknown.add(f"seconds per {role} request of {bill.model} ({key.rsplit(' ', 1)[-1]})")
        row["usd"] = job_usd
        totals["questions"] += p.questions
        jobs.append(row)
    return {
        "jobs": len(plans), "ingests": len(ingests), "ingests_cached": sum(p.ingest_cached for p in ingests.values()),
        "ingests_to_build": sum(not p.ingest_cached for p in ingests.values()),
        "totals": {**totals, "tokens": round(totals["tokens"]), "usd": usd if not unpriced else None,
                   "usd_priced": usd},
        "unpriced_models": sorted(unpriced),
        "wall_seconds": seconds, "wall_unknown": sorted(unknown),
        "per_job": jobs,
    }


def render(plan: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=sys.stdout, width=160)
    table = Table(title=f"plan: {plan['jobs']} jobs, {plan['ingests']} distinct ingests "
                        f"({plan['ingests_cached']} cached, {plan['ingests_to_build']} to build)")
    cols = ["job", "dataset", "questions", "generation_calls", "judge_calls", "cached", "tokens", "usd"]
    for col in cols:
        table.add_column(col)
    for r in plan["per_job"]:
        cached = sum(v for k, v in r.items() if k.endswith("_cached") and k != "ingest_cached")
        tokens = sum(v for k, v in r.items() if k.endswith("_tokens"))
        label = escape(r["job"] + (f" [baseline: {r['baseline']}]" if r["baseline"] else ""))
        usd = "unpriced" if r["usd"] is None else f"{r['usd']:.4f}"
        table.add_row(label, r["dataset"], str(r["questions"]), str(r.get("generation_calls", 0)),
                      str(r.get("judge_calls", 0)), str(cached), str(tokens), usd)
    console.print(table)
    t = plan["totals"]
    usd = f"${t['usd']:.4f}" if t["usd"] is not None else \
        f"${t['usd_priced']:.4f} + unpriced models: {', '.join(plan['unpriced_models'])}"
    wall = f"{plan['wall_seconds']:.0f} s" + (f" + unknown ({'; '.join(plan['wall_unknown'])}: no run recorded "
                                              "a rate in this cache yet)" if plan["wall_unknown"] else "")
    console.print(f"total: {t['questions']} questions, {t.get('generation_calls', 0)} generation + "
                  f"{t.get('judge_calls', 0)} judge requests to send ({t['cached_calls']} cached), "
                  f"{t['tokens']} tokens, {usd}, est. wall time {wall}")


def main(argv: Sequence[str], json_path: str | None) -> int:
    pilot, argv = split_pilot_args(argv)
    if pilot:  # plan.pilot=...: the questions a comparison needs, not a sweep's bill
        return sample_size.main(pilot, json_path)
    try:
        plan = make_plan(argv)
    except RagbenchError as exc:
        print(f"ragbench plan: {coded(exc)}", file=sys.stderr)
        return 1
    render(plan)
    if json_path:
        try:
            write_json(Path(json_path), plan)
        except OSError as exc:
            print(f"ragbench plan: cannot write plan.json={json_path} ({os_reason(Path(json_path), exc)}); the plan is "
                  "printed above; fix: name a file in a writable folder, e.g. plan.json=plan.json", file=sys.stderr)
            return 1
    return 0


def write_json(path: Path, plan: dict[str, Any]) -> None:
    """The plan as JSON at ``path`` (its folder made if missing); an OSError when it cannot be written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=1, default=str), encoding="utf-8")



