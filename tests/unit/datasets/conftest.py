"""Shared helpers of the dataset tests: copies of the bundled samples, tiny PDFs, raw-file readers."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ragbench.datasets.base import bundled_sample

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def make_pdf(pages: list[str]) -> bytes:
    """A valid PDF with one Helvetica text line per ``\\n``-separated line of each page (no dependency)."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled below
    pages_id = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    kids = []
    for text in pages:
        lines = [ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for ln in text.split("\n")]
        ops = "BT /F1 11 Tf 14 TL 72 740 Td " + " ".join(f"({ln}) Tj T*" for ln in lines) + " ET"
        stream = ops.encode("latin-1")
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        kids.append(add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                        b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (pages_id, content, font)))
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id
    objects[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, catalog, xref)
    return bytes(out)


@pytest.fixture
def sample_copy(tmp_path: Path) -> Callable[[str], Path]:
    """Copies a bundled sample into a writable temporary folder (to corrupt it in a test)."""

    def make(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(bundled_sample(name), dst)
        for p in dst.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        return dst

    return make


@pytest.fixture
def pdf() -> Callable[[list[str]], bytes]:
    """``pdf(["page 1 text", "page 2 text"])`` -> bytes of a valid PDF."""
    return make_pdf
