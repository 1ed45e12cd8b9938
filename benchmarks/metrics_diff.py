"""Dump what sweeps logged to MLflow (metrics, params, tags, artifacts), and diff two dumps: a change that
should change no result must change nothing here.

    python benchmarks/metrics_diff.py dump --code /work/before sqlite:///before/design/mlflow.db [...] before.json
    python benchmarks/metrics_diff.py dump --code /work/main sqlite:///after/design/mlflow.db [...] after.json
    python benchmarks/metrics_diff.py diff before.json after.json [--ignore-prefix retrieval/chunk/ params:tracking.]
        [--rename old/key=new/key ...]

A run is keyed by its store's folder and its run name (``design/topk=5 dataset=qasper #3``), a sweep's parent
run by ``design/(sweep)``: give each sweep its own store. Per run the dump holds

- metrics: all but those that measure the machine (``SKIP``) or count what the cache held (``CACHE_STATE``,
  kept with ``--cold`` when both sides ran from an empty cache);
- params: all;
- tags: all but the volatile ones (``VOLATILE_TAGS``: run ids, owner, commit, the artifact list, ...);
- artifacts: JSON, JSONL and CSV files parsed, volatile fields dropped (``VOLATILE_KEYS``, ``SKIP``) and kept
  in full, so a diff names the field that changed; a rendered view (HTML, Markdown, image) only as present;
  any other file as the hash of its normalised text.

Every string is normalised: the store's folder becomes ``<store>``, the folder holding it ``<root>``, the
source tree given as ``--code`` ``<code>``, a temporary path ``<tmp>``, an MLflow run id ``<run-id>``, a
timestamp ``<time>``, so two stores of the same sweeps dump the same.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import math
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

# metric keys (and keys of JSON artifacts) that measure the machine, not the job
SKIP = ("latency/", "time/", "timing/", "sweep/")
# ... and those that count what the cache already held: work done, requests and tokens sent, what was saved.
# Kept with ``dump --cold`` (both sides ran from an empty cache, CACHE=<new folder>), so accounting is compared too.
CACHE_STATE = ("cache/", "ingest/", "counts/embedded_texts", "embedded_texts", "llm/", "saved/", "tokens/", "cost/")
VOLATILE_TAGS = {
    "mlflow.parentRunId", "mlflow.user", "mlflow.loggedArtifacts", "mlflow.log-model.history",
    "ragbench.owner",  # host:pid:start
    "ragbench.git_commit", "ragbench.job_hash",  # the job hash includes the commit
    "ragbench.report_key",  # hashes the run ids of the sweep's jobs
    "ragbench.reused_from",  # a run id
}
VOLATILE_TAG_PREFIXES = ("mlflow.source.",)
CACHE_STATE_TAGS = ("ragbench.cache_key.",)  # a job tags the key of each stage it consulted: not those cached later
# JSON fields (the last part of a key) that measure the machine or name a run, a time or a process
VOLATILE_KEYS = re.compile(r"(^|/)(latency|timings?|times?|durations?|elapsed\w*|\w*_(ms|seconds)|run_id|run_ids|"
                           r"parent_run_id|start_time|end_time|timestamp|created(_at)?|owner|pid|host(name)?|"
                           r"git_commit|job_hash|"  # the job hash includes the commit
                           # compare's Holm family holds the latency/ metrics: their noise moves every p_holm,
                           # and with it a verdict (seen: context/tokens "no detectable" <-> "no practical")
                           r"p_holm|verdict)$")
RENDERED = (".html", ".md", ".png", ".svg", ".pdf")
RUN_ID = re.compile(r"\b[0-9a-f]{32}\b")
TIME = re.compile(r"\d{4}-\d\d-\d\d[ T_]\d\d[:-]\d\d[:-]\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?")
TMP = re.compile(re.escape(tempfile.gettempdir()) + r"/[^\s\"',;)]*")


class Normaliser:
    """Keys and strings as a second store of the same sweep would log them (see the module docstring)."""

    def __init__(self, store: Path, cold: bool, code: str | None = None) -> None:
        self.store, self.root, self.code = str(store), str(store.parent), code
        self.skip = SKIP if cold else SKIP + CACHE_STATE
        self.skip_tags = VOLATILE_TAG_PREFIXES if cold else VOLATILE_TAG_PREFIXES + CACHE_STATE_TAGS

    def text(self, s: str) -> str:
        s = s.replace(self.store, "<store>").replace(self.root + "/", "<root>/")
        if self.code:
            s = s.replace(self.code.rstrip("/") + "/", "<code>/")
        s = TMP.sub("<tmp>", s)
        s = RUN_ID.sub("<run-id>", s)
        return TIME.sub("<time>", s)

    def volatile(self, key: str) -> bool:
        """A metric key, JSON field or tag name (a record's copy of the tags) that a second run changes."""
        return (key.startswith(self.skip) or key in VOLATILE_TAGS or key.startswith(self.skip_tags)
                or bool(VOLATILE_KEYS.search(key)))

    def obj(self, o: Any) -> Any:
        """A parsed JSON value with its volatile fields dropped and its strings normalised; a table
        (``{"columns", "data"}``, pandas' split layout) as a list of rows, so a volatile column goes."""
        if isinstance(o, dict) and set(o) == {"columns", "data"}:
            o = [dict(zip(o["columns"], row, strict=True)) for row in o["data"]]
        if isinstance(o, dict):
            return {self.text(k): self.obj(v) for k, v in o.items() if not self.volatile(k)}
        if isinstance(o, list):  # a record of a volatile metric (compare's rows) goes as a whole
            return [self.obj(v) for v in o if not (isinstance(v, dict) and self.volatile(str(v.get("metric", ""))))]
        return self.text(o) if isinstance(o, str) else o


def _artifact(path: Path, norm: Normaliser) -> Any:
    """A JSON/JSONL/CSV file's normalised content; a rendered view (report, plot) only as present (what it
    draws is in the JSON beside it, and it draws latency); any other file ``sha256:...`` of its normalised text
    (of its bytes if binary)."""
    if path.suffix in RENDERED:
        return "(rendered view, not compared)"
    data = path.read_bytes()
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return "sha256:" + hashlib.sha256(data).hexdigest()
    try:
        if path.suffix == ".json":
            return norm.obj(json.loads(text))
        if path.suffix == ".jsonl":
            return [norm.obj(json.loads(line)) for line in text.splitlines() if line.strip()]
        if path.suffix == ".csv":
            return norm.obj(list(csv.DictReader(io.StringIO(text))))
    except (json.JSONDecodeError, csv.Error):
        pass
    return "sha256:" + hashlib.sha256(norm.text(text).encode()).hexdigest()


def _files(client: Any, run_id: str, folder: str | None = None) -> list[str]:
    out: list[str] = []
    for f in client.list_artifacts(run_id, folder):
        out.extend(_files(client, run_id, f.path) if f.is_dir else [f.path])
    return out


def dump_store(uri: str, cold: bool = False, code: str | None = None) -> dict[str, dict[str, Any]]:
    """Every run of one store, keyed ``<store folder>/<run name>``."""
    import mlflow

    store = Path(uri.removeprefix("sqlite:///")).parent if uri.startswith("sqlite:///") else Path(uri)
    norm = Normaliser(store, cold, code)
    client = mlflow.MlflowClient(tracking_uri=uri)
    jobs: dict[str, dict[str, Any]] = {}
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], max_results=5000):
            tags = run.data.tags
            name = "(sweep)" if tags.get("ragbench.role") == "sweep" else norm.text(run.info.run_name or "")
            key = f"{store.name}/{name}"
            if key in jobs:
                raise SystemExit(f"error: two runs named {name!r} in {uri}; fix: one sweep per store")
            local = Path(client.download_artifacts(run.info.run_id, ""))
            jobs[key] = {
                "status": run.info.status,
                "metrics": {k: v for k, v in sorted(run.data.metrics.items()) if not k.startswith(norm.skip)},
                "params": {k: norm.text(v) for k, v in sorted(run.data.params.items())},
                "tags": {k: norm.text(v) for k, v in sorted(tags.items()) if not norm.volatile(k)},
                "artifacts": {p: _artifact(local / p, norm) for p in sorted(_files(client, run.info.run_id))},
            }
    return jobs


def dump(uris: list[str], out: str, cold: bool = False, code: str | None = None) -> int:
    jobs: dict[str, dict[str, Any]] = {}
    for uri in uris:
        jobs.update(dump_store(uri, cold, code))
    with open(out, "w") as f:
        json.dump(jobs, f, indent=None, sort_keys=True, separators=(",", ":"))
    count = {kind: sum(len(j[kind]) for j in jobs.values()) for kind in ("metrics", "params", "tags", "artifacts")}
    print(f"{len(jobs)} runs, " + ", ".join(f"{n} {kind}" for kind, n in count.items()) + f" -> {out}")
    return 0


# ------------------------------------------------------------------ diff
def _parts_match(key: str, prefix: str) -> bool:
    """``prefix`` starts ``key`` or one of its /-separated parts: ``answer/f1`` matches ``by_type/x/answer/f1``."""
    return ("/" + prefix) in ("/" + key)


def _renamed(key: str, renames: dict[str, str]) -> str:
    """``key`` with each renamed ``old`` replaced where it stands as whole /-separated parts."""
    for old, new in renames.items():
        key = ("/" + key + "/").replace("/" + old + "/", "/" + new + "/")[1:-1]
    return key


def _clean(o: Any, metric_ignores: list[str], renames: dict[str, str]) -> Any:
    """A JSON artifact's content without the ignored metric keys, renamed keys (and key-like strings) renamed."""
    if isinstance(o, dict):
        return {_renamed(k, renames): _clean(v, metric_ignores, renames) for k, v in o.items()
                if not any(_parts_match(k, p) for p in metric_ignores)}
    if isinstance(o, list):  # a record of an ignored metric (compare's rows) goes as a whole
        return [_clean(v, metric_ignores, renames) for v in o
                if not (isinstance(v, dict) and any(_parts_match(str(v.get("metric", "")), p) for p in metric_ignores))]
    return _renamed(o, renames) if isinstance(o, str) and " " not in o else o


def _prepare(jobs: dict[str, Any], ignore: list[str], renames: dict[str, str]) -> dict[str, Any]:
    """Each run with what ``--ignore-prefix`` names removed and ``--rename`` applied (an empty dict: as is).

    ``--ignore-prefix p`` drops metric keys holding ``p`` (at the start or at a /-part), in JSON artifacts too;
    ``params:p``, ``tags:p``, ``artifacts:p`` drop params, tags, artifact files whose key starts with ``p``."""
    metric_ignores = [p for p in ignore if p.partition(":")[0] not in ("params", "tags", "artifacts")]
    other = [tuple(p.split(":", 1)) for p in ignore if p not in metric_ignores]
    out: dict[str, Any] = {}
    for job, run in jobs.items():
        out[job] = {"status": run["status"],
                    "metrics": {_renamed(k, renames): v for k, v in run["metrics"].items()
                                if not any(_parts_match(k, p) for p in metric_ignores)}}
        for kind in ("params", "tags", "artifacts"):
            out[job][kind] = {k: v for k, v in run[kind].items()
                              if not any(kind == head and k.startswith(p) for head, p in other)}
        out[job]["artifacts"] = {k: _clean(v, metric_ignores, renames) for k, v in out[job]["artifacts"].items()}
    return out


def _same(x: Any, y: Any) -> bool:
    return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))


def _leaves(o: Any, path: str = "") -> dict[str, Any]:
    """A JSON value as {path: leaf}: ``cases.jsonl[3].answer/f1``."""
    if isinstance(o, dict) and o:
        return {k: v for key, val in o.items() for k, v in _leaves(val, f"{path}.{key}" if path else key).items()}
    if isinstance(o, list) and o:
        return {k: v for i, val in enumerate(o) for k, v in _leaves(val, f"{path}[{i}]").items()}
    return {path: o}


def diff(a_path: str, b_path: str, ignore: list[str], renames: dict[str, str], show: int = 5) -> int:
    with open(a_path) as f:
        a = _prepare(json.load(f), ignore, renames)
    with open(b_path) as f:
        b = _prepare(json.load(f), ignore, {})
    kinds = ("metrics", "params", "tags", "artifacts")
    diffs = dict.fromkeys(kinds, 0)
    compared = dict.fromkeys(kinds, 0)
    other = 0  # runs in one dump only, runs whose status differs
    for job in sorted(set(a) | set(b)):
        if job not in a or job not in b:
            print(f"run only in {'after' if job in b else 'before'}: {job}")
            other += 1
            continue
        if a[job]["status"] != b[job]["status"]:
            other += 1
            print(f"{job}  status: {a[job]['status']} -> {b[job]['status']}")
        for kind in kinds:
            x, y = a[job][kind], b[job][kind]
            for key in sorted(set(x) | set(y)):
                compared[kind] += 1
                if key not in x or key not in y:
                    diffs[kind] += 1
                    print(f"{job}  {kind[:-1]} only in {'after' if key in y else 'before'}: {key}")
                elif not _same(x[key], y[key]):
                    diffs[kind] += 1
                    if kind != "artifacts" or isinstance(x[key], str) or isinstance(y[key], str):
                        print(f"{job}  {kind[:-1]} {key}: {str(x[key])[:200]} -> {str(y[key])[:200]}")
                        continue
                    lx, ly = _leaves(x[key], key), _leaves(y[key], key)
                    changed = [p for p in sorted(set(lx) | set(ly))
                               if p not in lx or p not in ly or not _same(lx[p], ly[p])]
                    print(f"{job}  artifact {key}: {len(changed)} fields differ")
                    for p in changed[:show]:
                        print(f"    {p}: {str(lx.get(p, '(absent)'))[:120]} -> {str(ly.get(p, '(absent)'))[:120]}")
    total = other + sum(diffs.values())
    print(f"{len(set(a) & set(b))} runs compared, {other} only in one dump or of another status; "
          + ", ".join(f"{kind}: {diffs[kind]} of {compared[kind]} differ" for kind in kinds)
          + f"; {total} differences")
    return 1 if total else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="URI [URI ...] OUT: one or more MLflow stores into one JSON file")
    d.add_argument("uris", nargs="+", metavar="URI")
    d.add_argument("out")
    d.add_argument("--cold", action="store_true",
                   help="the sweeps ran from an empty cache: keep what depends on the cache's state (CACHE_STATE)")
    d.add_argument("--code", help="the source tree that ran the sweeps (its paths, e.g. a prompt file, become <code>)")
    c = sub.add_parser("diff")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--ignore-prefix", nargs="*", default=[], metavar="PREFIX",
                   help="metric keys to skip (also inside JSON artifacts); params:/tags:/artifacts:PREFIX for "
                        "the other kinds")
    c.add_argument("--rename", nargs="*", default=[], metavar="OLD=NEW",
                   help="a metric key renamed on purpose (whole /-separated parts; also inside artifacts)")
    c.add_argument("--show", type=int, default=5, help="differing fields shown per artifact")
    args = p.parse_args()
    if args.cmd == "dump":
        return dump(args.uris, args.out, args.cold, args.code)
    renames = dict(r.split("=", 1) for r in args.rename)
    return diff(args.before, args.after, args.ignore_prefix, renames, args.show)


if __name__ == "__main__":
    sys.exit(main())
