"""``output.processed_docs=true``: each document's chunk tree as Markdown in the job's record folder.

Written to ``<record folder>/processed_docs/`` once the pipeline has run, so the record's upload at the
job's end (``ragbench.tracking.mlflow_sink.log_files``) logs the folder as the run's ``processed_docs/``
artifacts. One file per document, ``<doc id>.md`` (characters outside ``[A-Za-z0-9._-]`` become ``_``;
a name two ids share gets ``-<8 hex of the id's SHA-256>``), plus ``index.md`` listing each document,
its file and its chunk count per level.

A file is the tree as the chunker made it, in document order: the document and section chunks as
headings (level name, id in backticks, their heading path), each paragraph as a heading with its id, its
``refs`` (the dataset's paragraph ids) and its text, its sentences as a list ``- `id` text``. Text above
the paragraph level is not repeated (it is its paragraphs'). A chunk of another level nests the same way
by depth. The text is redacted like the rest of the record (``ragbench.redact``).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

from ragbench.redact import redact
from ragbench.types import Chunk, ChunkTree, Level

FOLDER = "processed_docs"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_names(doc_ids: list[str]) -> dict[str, str]:
    """Each document's file name (see the module docstring)."""
    safe = {d: _UNSAFE.sub("_", d)[:100] or "_" for d in doc_ids}
    shared = Counter(s.lower() for s in safe.values())  # case-insensitive file systems too
    return {d: (f"{s}-{hashlib.sha256(d.encode()).hexdigest()[:8]}" if shared[s.lower()] > 1 or s.lower() == "index"
                else s) + ".md" for d, s in safe.items()}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _render(tree: ChunkTree, chunk: Chunk, depth: int, out: list[str]) -> None:
    name = chunk.level.name.lower()
    if chunk.level == Level.SENTENCE:
        out.append(f"- `{chunk.chunk_id}` {_one_line(chunk.text)}")
        return
    heading = f" — {' / '.join(chunk.heading)}" if chunk.heading else ""
    if out and out[-1]:
        out.append("")
    out += [f"{'#' * min(depth + 1, 6)} {name} `{chunk.chunk_id}`{heading}", ""]
    if chunk.refs:
        out += [f"refs: {', '.join(f'`{r}`' for r in chunk.refs)}", ""]
    if chunk.level <= Level.PARAGRAPH:
        out += [chunk.text.strip(), ""]
    for child in chunk.children:
        _render(tree, tree[child], depth + 1, out)


def write(folder: Path, tree: ChunkTree) -> Path:
    """Writes the Markdown files into ``folder/processed_docs`` and returns that folder."""
    roots: dict[str, list[Chunk]] = {}
    counts: dict[str, Counter[str]] = {}
    for chunk in tree.chunks.values():
        counts.setdefault(chunk.doc_id, Counter())[chunk.level.name.lower()] += 1
        if chunk.parent_id is None or chunk.parent_id not in tree.chunks:
            roots.setdefault(chunk.doc_id, []).append(chunk)
    names = file_names(list(counts))
    out_dir = folder / FOLDER
    out_dir.mkdir(parents=True, exist_ok=True)
    index = ["# Processed documents\n", "| document | file | chunks |", "|---|---|---|"]
    for doc_id, name in names.items():
        lines: list[str] = []
        for root in roots.get(doc_id, []):
            _render(tree, root, 0, lines)
        (out_dir / name).write_text(redact("\n".join(lines)) + "\n", encoding="utf-8")
        per_level = ", ".join(f"{n} {lvl}" for lvl, n in sorted(counts[doc_id].items()))
        index.append(f"| `{doc_id}` | [{name}]({name}) | {per_level} |")
    (out_dir / "index.md").write_text(redact("\n".join(index)) + "\n", encoding="utf-8")
    return out_dir
