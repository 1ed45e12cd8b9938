"""Section detection in raw text: Markdown ``#`` headings, numbered headings (``1.2``), 第X章/节."""

from __future__ import annotations

import re

from ragbench.types import Paragraph, Section

_MD = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_NUMBERED = re.compile(r"^((?:\d+\.)*\d+)\.?\s+(\S.{0,78})$")
_CHINESE = re.compile(r"^第[一二三四五六七八九十百千零〇两\d]+([章节])\s*(.*)$")


def heading_of(line: str) -> tuple[int, str] | None:
    """(depth, title) if ``line`` is a heading, else None. Depth 1 is the outermost."""
    s = line.strip()
    if not s or len(s) > 120:
        return None
    if m := _MD.match(s):
        return len(m.group(1)), m.group(2).strip()
    if m := _CHINESE.match(s):
        return (1 if m.group(1) == "章" else 2), s
    if (m := _NUMBERED.match(s)) and not s.endswith((".", "。", ",", ";", ":")):
        title = m.group(2)
        if title[:1].isupper() or not title[:1].isascii():
            return m.group(1).count(".") + 1, s
    return None


def split_sections(text: str, *, default_title: str) -> list[Section]:
    """Sections of raw ``text``: a heading opens a section whose title is the heading path
    (``Parent > Child``); paragraphs are blank-line separated blocks."""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    title = default_title
    block: list[str] = []
    paras: list[Paragraph] = []

    def flush_block() -> None:
        if block:
            joined = " ".join(x.strip() for x in block if x.strip())
            if joined:
                paras.append(Paragraph(text=joined))
            block.clear()

    def flush_section() -> None:
        flush_block()
        if paras:
            sections.append(Section(title=title, paragraphs=tuple(paras), meta={"heading": title}))
            paras.clear()

    for line in text.splitlines():
        head = heading_of(line)
        if head:
            flush_section()
            depth, name = head
            path[:] = [p for p in path if p[0] < depth] + [(depth, name)]
            title = " > ".join(p[1] for p in path)
        elif not line.strip():
            flush_block()
        else:
            block.append(line)
    flush_section()
    return sections
