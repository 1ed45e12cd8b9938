"""``python -m ragbench.datasets {download,stats,list,generate,inspect}``: fetch official files, summarise a
dataset, generate an evaluation set from your own documents and inspect one."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from ragbench import session
from ragbench.datasets.download import dataset_dir, download, install_archive, is_present
from ragbench.datasets.evalgen.cli import cmd_generate as generate
from ragbench.datasets.financebench import QUESTIONS
from ragbench.datasets.inspect_set import inspect_file
from ragbench.datasets.sources import ALL, SOURCES, financebench_pdf
from ragbench.datasets.stats import summarize
from ragbench.errors import ConfigError, RagbenchError, coded
from ragbench.preview import preview, render

CONF_DIR = Path(__file__).resolve().parent.parent / "conf" / "dataset"


def _options() -> list[str]:
    return sorted(p.stem for p in CONF_DIR.glob("*.yaml"))


def load_config(name: str, overrides: list[str]):  # -> DictConfig (omegaconf imported lazily)
    """The ``conf/dataset/<name>.yaml`` node with ``key=value`` overrides applied."""
    from omegaconf import OmegaConf

    path = CONF_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown dataset {name!r}; choose one of {_options()}")
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"overrides must look like key=value (e.g. split=all), got {bad}")
    return OmegaConf.merge(OmegaConf.load(path), OmegaConf.from_dotlist(overrides))


def _financebench_pdfs(root: Path) -> tuple:
    """The filings referenced by the downloaded FinanceBench questions."""
    names: dict[str, None] = {}
    for line in (root / QUESTIONS).read_text(encoding="utf-8").splitlines():
        if line.strip():
            names[json.loads(line)["doc_name"]] = None
    return tuple(financebench_pdf(n) for n in names)


def cmd_download(args: argparse.Namespace) -> int:
    """``download <name>|all [--pdfs] [--force] [--dest DIR]``."""
    if args.name == "all":
        return _download_all(args)
    source = SOURCES.get(args.name)
    if source is None:
        print(f"no official download for {args.name!r}; downloadable: all, {', '.join(sorted(SOURCES))}", file=sys.stderr)
        return 2
    root = Path(args.dest).expanduser() if args.dest else dataset_dir(args.name)
    if args.zip:  # the official archive fetched by hand: checked against its published checksum, unpacked
        install_archive(source, Path(args.zip).expanduser(), root)
    else:
        download(source, root, force=args.force, retries=args.retries)
    if args.pdfs:
        if args.name != "financebench":
            print("--pdfs only applies to financebench", file=sys.stderr)
            return 2
        download(source, root, force=args.force, retries=args.retries, files=_financebench_pdfs(root))
    print(f"{args.name}: official files in {root}")
    if args.name.startswith("beir/"):
        print(f"use them with: dataset=beir dataset.path={root}")
    elif not args.dest:
        print(f"use them with: dataset={args.name} dataset.variant=full")
    else:
        print(f"use them with: dataset={args.name} dataset.path={root}")
    return 0


def _download_all(args: argparse.Namespace) -> int:
    """``download all``: each dataset of ``sources.ALL`` in turn, into its own folder (below ``--dest`` when
    given); a failed one is named and the others still run; exit 1 when any failed."""
    if args.zip:
        print("--zip installs one archive: use it with one dataset name, not all", file=sys.stderr)
        return 2
    failed: list[str] = []
    for i, name in enumerate(ALL, 1):
        print(f"[{i}/{len(ALL)}] {name}", flush=True)
        one = argparse.Namespace(**{**vars(args), "name": name,
                                    "dest": str(Path(args.dest) / name) if args.dest else None,
                                    "pdfs": args.pdfs and name == "financebench"})
        try:
            if cmd_download(one) != 0:
                failed.append(name)
        except RagbenchError as exc:
            print(f"error: {coded(exc)}", file=sys.stderr)
            failed.append(name)
    if failed:
        print(f"download all: {len(failed)} of {len(ALL)} failed ({', '.join(failed)}); fix the lines above "
              "and run it again (what is in place is kept)", file=sys.stderr)
        return 1
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """``stats <name> [key=value ...]``: the dataset as the adapter reads it, before any chunking."""
    from hydra.utils import instantiate
    from rich.console import Console
    from rich.table import Table

    es = instantiate(load_config(args.name, args.overrides)).load()
    s = summarize(es)
    console = Console()
    head = Table(title=f"{s.name} ({s.variant})", show_header=False)
    for key, value in (("fingerprint", s.fingerprint[:16]), ("files read", len(es.files)), ("documents", s.documents),
                       ("sections", s.sections), ("paragraphs", s.paragraphs), ("characters", s.characters),
                       ("questions", s.queries), ("evidence (ref / text)", f"{s.evidence_ref} / {s.evidence_text}")):
        head.add_row(key, str(value))
    for key, value in s.tags.items():
        head.add_row(f"tag {key}", value)
    console.print(head)
    table = Table(title="questions by type")
    table.add_column("type", no_wrap=True)
    for col in ("questions", "answerable", "w/ evidence", "evidence", "found verbatim"):
        table.add_column(col, justify="right")
    rows = [*s.by_type.items(), ("total", s.total)]
    for t, row in rows:
        found = f"{row.evidence_found} ({row.evidence_found / row.evidence:.0%})" if row.evidence else "-"
        table.add_row(t, str(row.queries), str(row.answerable), str(row.with_evidence), str(row.evidence), found)
    console.print(table)
    adapter = Table(title="adapter counters (skipped / unparseable / unmatched)")
    adapter.add_column("counter")
    adapter.add_column("value", justify="right")
    for key, value in s.adapter_stats.items():
        adapter.add_row(key, str(value))
    console.print(adapter)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``list``: dataset options and their cache state."""
    for name in _options():
        source = SOURCES.get(name)
        state = ("downloaded" if is_present(source, dataset_dir(name)) else "not downloaded") if source else "local only"
        print(f"{name:14s} {state:15s} {dataset_dir(name) if source else ''}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """``generate key=value ...``: see ragbench/datasets/evalgen/cli.py."""
    return generate(args.overrides)


def cmd_inspect(args: argparse.Namespace) -> int:
    """``inspect FILE [--docs DIR] [-n N]``: see ragbench/datasets/inspect_set.py."""
    return inspect_file(Path(args.file), docs=args.docs, examples=args.examples)


def cmd_preview(args: argparse.Namespace) -> int:
    """``preview dataset=NAME ... --max-depth D --limit N [--json]``: see ragbench/preview.py."""
    print(render(preview(args.overrides, max_depth=args.max_depth, limit=args.limit), as_json=args.json))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    session.begin()  # the process's run state: the ledger an evalgen client books to (ragbench.session)
    parser = argparse.ArgumentParser(prog="python -m ragbench.datasets", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("download", help="fetch the official files into the cache ($RAGBENCH_CACHE)")
    p.add_argument("name", help=f"a dataset, beir/<name>, or all ({', '.join(ALL)})")
    p.add_argument("--force", action="store_true", help="download again even if present")
    p.add_argument("--pdfs", action="store_true", help="financebench: also fetch the referenced filings")
    p.add_argument("--dest", help="folder to download into instead of the cache")
    p.add_argument("--retries", type=int, default=3)
    p.add_argument("--zip", help="install the official archive you downloaded by hand (checksum checked)")
    p.set_defaults(func=cmd_download)
    p = sub.add_parser("stats", help="documents, questions by type, evidence coverage, skipped items")
    p.add_argument("name")
    p.add_argument("overrides", nargs="*", help="dataset config overrides, e.g. split=all path=/data/x")
    p.set_defaults(func=cmd_stats)
    p = sub.add_parser("list", help="dataset options and whether their official files are cached")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("generate", help="write an evaluation set from your documents (docs/own-data.md)")
    p.add_argument("overrides", nargs="*", help="dataset=custom dataset.path=DOCS out=eval.json llm=... n=200 "
                   "split=0.5 critic.model=... (every key: ragbench/conf/generate.yaml; any job key works too)")
    p.set_defaults(func=cmd_generate)
    p = sub.add_parser("inspect", help="counts, evidence match rate, examples and bad items of an evaluation set")
    p.add_argument("file")
    p.add_argument("--docs", help="the documents folder (default: the one recorded in the file)")
    p.add_argument("-n", "--examples", type=int, default=3)
    p.set_defaults(func=cmd_inspect)
    p = sub.add_parser("preview", help="the chunk tree a job would index: dataset=NAME [chunker.*=...]")
    p.add_argument("overrides", nargs="*", help="job overrides, e.g. dataset=locomo chunker.search_level=paragraph")
    p.add_argument("--max-depth", type=int, default=2, help="levels below the document (2: to paragraphs)")
    p.add_argument("--limit", type=int, default=3, help="documents shown")
    p.add_argument("--json", action="store_true", help="JSON instead of an outline")
    p.set_defaults(func=cmd_preview)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except RagbenchError as exc:
        print(f"error: {coded(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
