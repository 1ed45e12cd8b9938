"""``python -m ragbench.datasets preview dataset=NAME [key=value ...] --max-depth 2 --limit 3 [--json]``:
the chunk tree exactly as a job would index it (EasyRAG's ``preprocess --limit --max-depth --json``).

The config is composed like a job's (``dataset=``, ``chunker.*`` and any other override), the dataset
adapter and the chunker run, and the first ``--limit`` documents are printed down to ``--max-depth``
levels below the document (0 document, 1 section, 2 paragraph, 3 sentence). Each node shows its id,
level, dataset ids (``refs``), whether it is searched, and its text (cut at ``--width`` characters in
the terminal view; whole in ``--json``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ragbench.build import instantiate_node as _instantiate
from ragbench.errors import ConfigError
from ragbench.types import ChunkTree, Level


def node(tree: ChunkTree, chunk_id: str, depth: int, max_depth: int) -> dict[str, Any]:
    """One chunk and, while ``depth < max_depth``, its children."""
    ch = tree[chunk_id]
    out: dict[str, Any] = {"id": ch.chunk_id, "level": Level(ch.level).name.lower(), "refs": list(ch.refs),
                           "searched": ch.level in tree.searched_levels, "text": ch.text}
    if ch.children and depth < max_depth:
        out["children"] = [node(tree, c, depth + 1, max_depth) for c in ch.children]
    elif ch.children:
        out["children_not_shown"] = len(ch.children)
    return out


def preview(overrides: Sequence[str], *, max_depth: int, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` documents' chunk trees, composed from job ``overrides``."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    if max_depth < 0 or limit < 1:
        raise ConfigError(f"preview: --max-depth must be >= 0 and --limit >= 1, got {max_depth} and {limit}")
    GlobalHydra.instance().clear()
    with initialize_config_module("ragbench.conf", version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    evalset = _instantiate(cfg.dataset).load()
    docs = evalset.documents[:limit]
    tree = _instantiate(cfg.chunker).chunk(docs)
    roots = [c.chunk_id for c in tree.chunks.values() if c.parent_id is None]
    return [node(tree, r, 0, max_depth) for r in roots]


def render(trees: list[dict[str, Any]], *, as_json: bool, width: int = 100) -> str:
    """JSON, or an indented outline."""
    if as_json:
        return json.dumps(trees, ensure_ascii=False, indent=2)
    lines: list[str] = []

    def walk(n: dict[str, Any], indent: int) -> None:
        text = " ".join(n["text"].split())
        text = text if len(text) <= width else text[: width - 1] + "…"
        refs = f" [{', '.join(n['refs'])}]" if n["refs"] else ""
        mark = " *" if n["searched"] else ""
        lines.append(f"{'  ' * indent}{n['level']} {n['id']}{refs}{mark}: {text}")
        for child in n.get("children", ()):
            walk(child, indent + 1)
        if n.get("children_not_shown"):
            lines.append(f"{'  ' * (indent + 1)}... {n['children_not_shown']} children below --max-depth")

    for t in trees:
        walk(t, 0)
    lines.append("(* = searched level)")
    return "\n".join(lines)
