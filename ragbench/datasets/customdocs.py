"""Documents of the custom adapter: titles (front matter ``title:``, a ``.md`` first heading, a JSONL corpus
line's ``title``) indexed with the first paragraph, as BEIR/MTEB index ``title + " " + text``."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ragbench.datasets.reader import FileReader, require
from ragbench.errors import DatasetError
from ragbench.ingest.sections import split_sections
from ragbench.types import Document, Paragraph, Section

_MD_HEAD = re.compile(r"^#\s+", flags=re.MULTILINE)
_FRONT_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_ -]*:(\s|$)")
FRONT_MATTER_MAX_LINES = 200


def md_title(text: str) -> str | None:
    r"""Title of the first ``# heading``: what r"^#\s+(.+?)\s*#*\s*$" (MULTILINE) captures, in linear time
    (that pattern backtracks cubically over a long run of spaces)."""
    m = _MD_HEAD.search(text)
    if not m:
        return None
    pos = m.end()
    if pos < len(text):  # the greedy \s+ stopped at a non-space: the title is the rest of that line
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        return line[: max(1, len(line.rstrip().rstrip("#").rstrip()))]
    tail = text[m.start() + 1:]  # "#" and only whitespace to the end: the last non-newline character
    return next((tail[j] for j in range(len(tail) - 1, 0, -1) if tail[j] != "\n"), None)


def front_matter(text: str) -> tuple[str | None, str]:
    """(``title:`` of a YAML front matter block, the text without the block). A block opens with ``---`` on the
    first line and closes with ``---`` or ``...`` within ``FRONT_MATTER_MAX_LINES`` lines; every line inside is a
    ``key: value``, a list item, an indented continuation, a comment or blank -- else the text has none."""
    lines = text.split("\n", FRONT_MATTER_MAX_LINES + 1)
    if not lines or lines[0].strip() != "---":
        return None, text
    title: str | None = None
    for i, line in enumerate(lines[1:FRONT_MATTER_MAX_LINES + 1], start=1):
        s = line.rstrip("\r")
        if s.strip() in ("---", "...") and not s.startswith((" ", "\t")):
            rest = "\n".join(lines[i + 1:])
            return title, rest
        if not s.strip() or s.lstrip().startswith("#") or s.startswith((" ", "\t", "- ")):
            continue
        if not _FRONT_KEY.match(s):
            return None, text  # not YAML: a "---" rule opening ordinary text
        key, _, value = s.partition(":")
        if key.strip().lower() == "title" and title is None:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            title = value.strip() or None
    return None, text


def with_title(doc_id: str, title: str | None, body: str, *, fallback: str, meta: dict[str, Any]) -> Document | None:
    """A document from raw text: sections by heading (``ingest.sections``), the ``title`` (when the file gives
    one) prepended to the first paragraph so every chunker indexes it; ``fallback`` names it otherwise (not
    indexed: a file name is not the document's text). None when there is no text."""
    sections = split_sections(body, default_title=title or fallback)
    if title:
        if sections:
            first = sections[0]
            lead = Paragraph(text=f"{title} {first.paragraphs[0].text}".strip(), ref=first.paragraphs[0].ref)
            sections[0] = replace(first, paragraphs=(lead, *first.paragraphs[1:]))
        else:  # a heading and nothing else: the title is the text
            sections = [Section(title=title, paragraphs=(Paragraph(text=title),))]
    if not sections:
        return None
    return Document(doc_id=doc_id, title=title or fallback, sections=tuple(sections),
                    meta={**meta, "title_indexed": bool(title)})


def text_document(doc_id: str, stem: str, suffix: str, text: str, rel: str) -> Document | None:
    """A ``.md``/``.txt`` file: its title is front matter ``title:``, else (``.md``) its first ``# heading``;
    without either the file's stem names it and no title is indexed."""
    title, body = front_matter(text)
    if title is None and suffix == ".md":
        title = md_title(body)  # its line opens a section (a heading no searched chunk carries): indexed here
    return with_title(doc_id, title, body, fallback=stem, meta={"file": rel})


def corpus_documents(reader: FileReader, rel: str, *, dataset: str, stats: dict[str, int]) -> list[Document]:
    """The documents of a JSONL corpus file: one per line, ``id`` (or BEIR's ``_id``), ``text`` and an optional
    ``title`` (indexed with the text). The line's id is the document's id in the QA file."""
    file = str(reader.root / rel)
    docs: list[Document] = []
    for n, row in enumerate(reader.read_jsonl(rel), start=1):
        where = f"line {n}"
        key = "_id" if "_id" in row and "id" not in row else "id"
        doc_id = str(require(row, key, dataset=dataset, file=file, where=where, types=(str, int), own=True))
        text = require(row, "text", dataset=dataset, file=file, where=where, types=(str,), own=True)
        title = row.get("title")
        if title is not None and not isinstance(title, str):
            raise DatasetError(f"expected str, found {type(title).__name__}", dataset=dataset, file=file,
                               record=where, field="title", fix='write "title" as a string, or leave it out')
        doc = with_title(doc_id, (title or "").strip() or None, text, fallback=doc_id,
                         meta={"file": rel, "line": n})
        if doc is None:
            stats["documents_empty"] += 1
            continue
        docs.append(doc)
    return docs
