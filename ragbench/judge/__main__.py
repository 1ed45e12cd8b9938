"""``python -m ragbench.judge calibrate LABELS.jsonl [-m] key=value ...``: score judge configurations against
human labels, one MLflow run each (a ``-m`` sweep: one parent run, as job sweeps), and print the agreement.
Each run writes a record as a job does (``ragbench.record``: ``run.json`` of kind ``calibration`` and a case
line per labelled item), logged by the jobs' MLflow sink, with the summary ``calibration.json`` beside it.

The config is ``conf/calibrate.yaml`` composed with the overrides (the ``judge`` group as in jobs); a
sweep expands like Hydra's basic sweeper (``ragbench.plan.cli.expand``). Exit 0 when every configuration
finished, 1 when one failed (one line naming it), 2 on a usage error, 130 on Ctrl-C.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ragbench import offline, session
from ragbench.budget import Budget
from ragbench.cache.replies import reply_store
from ragbench.errors import ConfigError, JobFailedError, RagbenchError, coded, described
from ragbench.identity import job_hash
from ragbench.judge.build import build_judges
from ragbench.judge.calibrate import calibrate
from ragbench.judge.calibration_settings import Settings
from ragbench.judge.labels import LabelSet, load_labels, sample_path
from ragbench.plan.cli import expand
from ragbench.protocols import LoggedParams, LoggedTags
from ragbench.record import ERROR_TAG, RecordWriter, begun, calibrated, failed, item_record
from ragbench.tracking.mlflow_sink import log_failure, log_files, log_results, open_run, start_params

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from ragbench.judge.calibrate import Calibration
    from ragbench.judge.labels import LabelSet
    from ragbench.record import RecordWriter, RunRecord
    from ragbench.tracking.mlflow_tracker import MlflowTracker

log = logging.getLogger("ragbench.judge")
USAGE = ("usage: python -m ragbench.judge calibrate LABELS.jsonl [-m] [key=value ...]\n"
         "  LABELS.jsonl  human labels (ragbench.judge.labels); 'sample' is the\n"
         "                bundled ExpertQA sample\n"
         "  -m            a sweep: one run per combination of the values\n"
         "  key=value     conf/calibrate.yaml and the judge group, e.g.\n"
         "                judge=llm judge.model=openai/gpt-4o-mini\n"
         "                judge.metrics=[faithfulness] scale=rubric max_score=4")
CALIBRATION_ARTIFACT = "calibration.json"
SETTINGS_KEYS = ("scale", "pass_at", "max_score", "probes", "repeats", "resamples", "seed", "level", "workers")


def compose(overrides: Sequence[str]) -> DictConfig:
    """``conf/calibrate.yaml`` with the overrides; a bad key or option is one ConfigError line."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
            return hydra_compose(config_name="calibrate", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise ConfigError(f"{first}\n  fix: see the keys of conf/calibrate.yaml and the options of conf/judge/") from None


def settings_of(cfg: DictConfig) -> Any:
    """The ``Settings`` of a composed config."""
    from omegaconf import OmegaConf

    values = {k: OmegaConf.to_object(cfg[k]) if OmegaConf.is_config(cfg[k]) else cfg[k] for k in SETTINGS_KEYS}
    values["probes"] = tuple(values["probes"] or ())
    keys = cfg.get("keys")
    plain = OmegaConf.to_container(keys, resolve=True) if OmegaConf.is_config(keys) else {}
    return Settings(keys={str(k): str(v) for k, v in dict(plain or {}).items()}, **values)  # type: ignore[arg-type]


def narrow_metrics(cfg: DictConfig, rubrics: Sequence[str], overrides: Sequence[str]) -> None:
    """An LLM judge asks only for the labelled rubrics it has (each rubric is one request per item),
    unless ``judge.metrics`` is given on the command line."""
    from omegaconf import open_dict

    if "metrics" not in cfg.judge or any(o.split("=", 1)[0].lstrip("+~") == "judge.metrics" for o in overrides):
        return
    wanted = [m for m in cfg.judge.metrics if m in rubrics]
    if wanted:
        with open_dict(cfg):
            cfg.judge.metrics = wanted


def run_name(number: int, overrides: Sequence[str]) -> str:
    """``#<n> <overrides>``: what ``ragbench.compare`` shows as the configuration."""
    return f"#{number} {','.join(overrides)}".rstrip()


def run_params(labels: LabelSet, judges: dict[str, Any]) -> dict[str, Any]:
    """What the config does not show: the labels file (path, hash, items) and the judges' own params."""
    params: dict[str, Any] = {"labels.path": labels.path, "labels.sha256": labels.sha256,
                              "labels.n": len(labels.items)}
    for judge in judges.values():
        if isinstance(judge, LoggedParams):
            params.update(judge.log_params())
    return params


def record_calibration(writer: RecordWriter, record: RunRecord, labels: LabelSet,
                       cal: Calibration) -> RunRecord:
    """A case line per labelled item into ``writer`` (``ragbench.record.item_record``); returns ``record``
    with the calibration's results (``ragbench.record.calibrated``)."""
    for item, row in zip(labels.items, cal.rows, strict=True):
        writer.case(item_record(item, row))
    return calibrated(record, labels, cal)


def report(cal: Calibration, name: str) -> None:
    """The agreement and the probes on stdout."""

    def ci(x: Any) -> str:
        return f"{x.value:.3f} [{x.low:.3f}, {x.high:.3f}]"

    print(f"== {name}")
    for rubric, a in cal.agreements.items():
        print(f"{rubric}: n={a.n} accuracy {ci(a.accuracy)} kappa {ci(a.kappa)} judge_failed={cal.failed[rubric]}")
        print(f"  confusion (rows human, columns judge; classes {list(a.classes)}): {[list(r) for r in a.confusion]}")
        for t, x in a.by_type.items():
            print(f"  {t}: n={x.n} accuracy {x.accuracy:.3f} kappa {x.kappa:.3f}")
    for probe, p in cal.probes.items():
        stats = ", ".join(f"{s} {ci(v)}" for s, v in p.stats.items()) or p.note
        print(f"probe {probe}: n={p.n} {stats}")


def run_one(number: int, overrides: Sequence[str], labels_arg: str, tracker_parent: str | None,
            tracker: MlflowTracker | None) -> tuple[MlflowTracker, str]:
    """Composes, builds the judges, calibrates and logs one configuration; returns (tracker, run id). Its
    record (``ragbench.record``, kind ``calibration``) is written as a job's is and logged by the jobs'
    MLflow sink (``ragbench.tracking.mlflow_sink``), whatever way the run ends."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = compose(overrides)
    labels = load_labels(sample_path() if labels_arg == "sample" else labels_arg)
    if cfg.get("limit"):
        labels = LabelSet(path=labels.path, sha256=labels.sha256, items=labels.items[: int(cfg.limit)])
    settings = settings_of(cfg)
    labels.check_scale(settings.scale, settings.max_score)  # before any judge is built or paid for
    narrow_metrics(cfg, labels.rubrics, overrides)
    cache = instantiate(cfg.cache)
    with reply_store(cache):  # the judges' clients keep their preflight replies there, as a job's do
        judges = build_judges(cfg.judge, instantiate)
    tracker = tracker or instantiate(cfg.tracking)
    tags = {"ragbench.role": "job", "ragbench.kind": "calibration", "ragbench.dataset": labels.name,
            "ragbench.dataset_sha256": labels.sha256, "ragbench.overrides": ",".join(overrides)}
    for judge in judges.values():
        if isinstance(judge, LoggedTags):
            tags.update(judge.log_tags())
    name = run_name(number, overrides)
    record = begun(name, cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True)),
                   lambda config: job_hash({**config, "labels": {"sha256": labels.sha256}}),
                   kind="calibration")
    record = dataclasses.replace(record, params=run_params(labels, judges), tags=tags)
    run_id = open_run(tracker, record, parent=tracker_parent)  # the tags: the record's, its environment
    with tempfile.TemporaryDirectory(prefix="ragbench-calibration-") as tmp:
        writer: RecordWriter | None = None
        status, error = "FAILED", None
        try:
            tracker.log_params(run_id, start_params(record))
            writer = RecordWriter(Path(tmp), record)
            session.current().ledger.start_job(Budget.from_config(cfg.get("budget")))
            for judge in judges.values():
                if hasattr(judge, "preflight"):
                    judge.preflight()
            model = next((str(j.model) for j in judges.values() if getattr(j, "model", None)), None)
            cal = calibrate(labels, judges, settings, judge_model=model, cache=cache)
            record = record_calibration(writer, record, labels, cal)
            log_results(tracker, run_id, record, table=writer.table)
            tracker.log_files(run_id, {CALIBRATION_ARTIFACT: json.dumps(cal.summary(), indent=1)},
                              redacted=True)
            report(cal, f"{name} (run {run_id})")
            status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            _end(tracker, run_id, writer, record, status, error)
    return tracker, run_id


def _end(tracker: MlflowTracker, run_id: str, writer: RecordWriter | None, record: RunRecord, status: str,
         error: BaseException | None) -> None:
    """The record's end into its file and into MLflow (``run.json`` and ``cases.jsonl``; a failure's error as
    its ``ragbench.error`` tag, as a job's), then the run's status. A FINISHED run whose record cannot be
    logged ends FAILED and raises (one line)."""
    text = None if error is None else described(error)  # [RB-...] Class: message, as a job's
    record = record if text is None else failed(record, text, {})
    lost: Exception | None = None
    try:
        if writer is not None:  # None: the record never opened (its params failed)
            writer.finish(record.ended(status, text))
            log_files(tracker, run_id, writer.folder)
    except Exception as exc:  # noqa: BLE001 - the run's failure, said on its status
        lost = exc
    if ERROR_TAG in record.tags or lost is not None:
        log_failure(tracker, run_id, record, scored=True, sink_error=None if lost is None else described(lost))
    tracker.end_run(run_id, "FAILED" if lost is not None else status)
    if lost is not None:
        if status == "FINISHED":
            raise JobFailedError(f"the record of run {run_id} was not logged: {lost}") from lost
        log.warning("the record of the %s run %s was not logged: %s", status, run_id, lost)


def calibrate_command(args: Sequence[str]) -> int:
    """``calibrate LABELS [-m] overrides``; returns the exit code."""
    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        return 0
    multirun = any(a in ("-m", "--multirun") for a in args)
    rest = [a for a in args if a not in ("-m", "--multirun")]
    unknown = [a for a in rest if a.startswith("-") and "=" not in a]
    if unknown:
        print(f"ragbench.judge: unknown option {unknown[0]!r}; fix: see calibrate --help", file=sys.stderr)
        return 2
    positional = [a for a in rest if "=" not in a]
    if len(positional) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    overrides = [a for a in rest if "=" in a]
    jobs = expand(overrides) if multirun else [overrides]
    tracker: MlflowTracker | None = None
    parent: str | None = None
    failed = 0
    for number, job in enumerate(jobs):
        try:
            if multirun and parent is None:
                from hydra.utils import instantiate

                tracker = instantiate(compose(job).tracking)
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                parent = tracker.start_run(run_name=f"calibration sweep {stamp}", tags={
                    "ragbench.role": "sweep", "ragbench.kind": "calibration", "ragbench.overrides": " ".join(args)})
                session.current().parents.opened(f"calibration {stamp}", parent, tracker)  # closed on any way out
            tracker, _ = run_one(number, job, positional[0], parent, tracker)
        except ConfigError as exc:
            print(f"ragbench.judge: {coded(exc)}", file=sys.stderr)
            if parent is not None and tracker is not None:
                session.current().parents.closing(parent)
                tracker.end_run(parent, "FAILED")
            return 2
        except RagbenchError as exc:
            print(f"ragbench.judge: configuration #{number} ({' '.join(job)}) failed: {coded(exc)}", file=sys.stderr)
            failed += 1
    if parent is not None and tracker is not None:
        session.current().parents.closing(parent)
        tracker.end_run(parent, "FAILED" if failed else "FINISHED")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatches the subcommand; returns the exit code."""
    offline.set_defaults()
    session.begin()  # the process's run state: the ledger the judges book to (ragbench.session)

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or args[0] != "calibrate":
        print(USAGE, file=sys.stderr if args and args[0] not in ("-h", "--help") else sys.stdout)
        return 0 if args and args[0] in ("-h", "--help") else 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return calibrate_command(args[1:])
    except KeyboardInterrupt:
        session.current().parents.close_all("KILLED")  # the calibration sweep's parent run, if one is open
        print("ragbench.judge: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
