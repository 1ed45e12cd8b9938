"""Text out of the document files adapters read: legacy-encoded .txt, .docx and .pdf bytes."""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib
from xml.etree.ElementTree import ParseError

from ragbench.datasets.limits import Limits

TEXT_ENCODINGS = ("auto", "utf-8", "mac_roman", "cp1252", "latin-1")

# What python-docx and pypdf raise on damaged files (they have no single base class). Catching these
# explicitly keeps a corrupt document "skipped and counted" instead of crashing the whole load.
DOCX_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile, KeyError, ValueError, ParseError, OSError, AttributeError, TypeError,
)


def _pdf_errors() -> tuple[type[BaseException], ...]:
    from pypdf.errors import PyPdfError

    return (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError, AssertionError,
            OSError, zlib.error, struct.error, RecursionError)


class UnreadableDocument(Exception):
    """A document file whose bytes cannot be turned into text (the adapter skips and counts it)."""


def decode_text(data: bytes, *, encoding: str = "auto") -> tuple[str, str]:
    """(text, encoding used). ``auto``: UTF-8 when the bytes are valid UTF-8, else Mac OS Roman.

    Mac OS Roman is the fallback because the SyllabusQA .txt syllabi are Mac Roman with CR line ends
    (their curly quotes and bullets only decode correctly that way); it decodes any byte string.
    """
    if encoding == "auto":
        try:
            return data.decode("utf-8-sig"), "utf-8"
        except UnicodeDecodeError:
            return data.decode("mac_roman"), "mac_roman"
    return data.decode(encoding), encoding


def paragraphs_of_text(text: str) -> list[str]:
    """Non-empty lines of a text with any line-end convention (CR, LF, CRLF), stripped."""
    lines = re.split(r"\r\n|\r|\n", text)
    return [line.strip() for line in lines if line.strip()]


def docx_text(data: bytes, limits: Limits | None = None) -> str:
    """Body of a .docx in reading order: paragraphs (``Heading N`` styles as Markdown headings) and
    table rows (cells joined by `` | ``), separated by blank lines.

    With ``limits``, a .docx whose members declare more than ``max_decompressed_mb`` is refused (``TooLarge``)
    before anything is unpacked, and so is a text over ``max_document_mb``.
    """
    if limits is not None:
        limits.check_zip(data)
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph as DocxParagraph

    try:
        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        for child in document.element.body.iterchildren():
            tag = child.tag.rsplit("}", 1)[-1]
            if tag == "p":
                para = DocxParagraph(child, document)
                text = para.text.strip()
                if not text:
                    continue
                style = para.style.name if para.style is not None else ""
                m = re.fullmatch(r"Heading (\d)", style or "")
                blocks.append(f"{'#' * int(m.group(1))} {text}" if m else text)
            elif tag == "tbl":
                for row in Table(child, document).rows:
                    cells = [c.text.strip() for c in row.cells]
                    cells = [c for i, c in enumerate(cells) if c and c not in cells[:i]]
                    if cells:
                        blocks.append(" | ".join(cells))
    except DOCX_ERRORS as exc:
        raise UnreadableDocument(f"{type(exc).__name__}: {exc}") from exc
    text = "\n\n".join(blocks)
    if limits is not None:
        limits.check_document("the text of the .docx", len(text))
    return text


def pdf_pages(data: bytes, limits: Limits | None = None) -> list[str]:
    """Text of every page of a PDF (pypdf), in page order; empty strings for pages without text.

    With ``limits``, reading stops with ``TooLarge`` as soon as the decoded page contents pass
    ``max_decompressed_mb`` or the text passes ``max_document_mb`` (pypdf bounds each stream itself).
    """
    from pypdf import PdfReader

    errors = _pdf_errors()
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocument("the PDF is encrypted with a password")
        pages: list[str] = []
        decoded = chars = 0
        for page in reader.pages:
            if limits is not None:
                contents = page.get_contents()
                decoded += len(contents.get_data()) if contents is not None else 0
                limits.check_expansion("the decoded page contents of the .pdf", decoded)
            pages.append((page.extract_text() or "").strip())
            chars += len(pages[-1])
            if limits is not None:
                limits.check_document("the text of the .pdf", chars)
        return pages
    except errors as exc:
        raise UnreadableDocument(f"{type(exc).__name__}: {exc}") from exc
