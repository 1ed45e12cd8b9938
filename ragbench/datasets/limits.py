"""Size limits on what a dataset may feed the chunker: one document's text, and how far a compressed
document file (.docx, which is a zip; .pdf streams) may expand. Untrusted files must not stall a run."""

from __future__ import annotations

import io
import math
import zipfile
from dataclasses import dataclass

from ragbench.errors import DatasetError
from ragbench.validate import real

MB = 1_000_000
# 32 MB of text is ~30x the largest document of any supported dataset (a 10-K filing is ~1 MB of text)
DEFAULT_MAX_DOCUMENT_MB = 32.0
# a .docx or .pdf may expand to this much in total; real syllabi and filings expand to a few MB
DEFAULT_MAX_DECOMPRESSED_MB = 200.0


class TooLarge(Exception):
    """A document or its expansion is over a limit; the adapter turns it into a DatasetError."""

    def __init__(self, what: str, size: int, key: str, limit_mb: float) -> None:
        self.what, self.size, self.key, self.limit_mb = what, size, key, limit_mb
        super().__init__(f"{what} is {size / MB:.3g} MB, over dataset.{key}={limit_mb:g}")


@dataclass(frozen=True)
class Limits:
    """``max_document_mb``: one document's text (file bytes of .txt/.md, checked before reading; extracted
    characters of everything else). ``max_decompressed_mb``: what one .docx/.pdf may expand to (a zip's
    declared member sizes, checked before anything is decompressed; a PDF's decoded page contents)."""

    max_document_mb: float = DEFAULT_MAX_DOCUMENT_MB
    max_decompressed_mb: float = DEFAULT_MAX_DECOMPRESSED_MB

    def __post_init__(self) -> None:
        real("dataset.max_document_mb", self.max_document_mb, lo=0, lo_open=True, default=DEFAULT_MAX_DOCUMENT_MB)
        real("dataset.max_decompressed_mb", self.max_decompressed_mb, lo=0, lo_open=True,
             default=DEFAULT_MAX_DECOMPRESSED_MB)

    @property
    def document_chars(self) -> int:
        return int(self.max_document_mb * MB)

    @property
    def decompressed_bytes(self) -> int:
        return int(self.max_decompressed_mb * MB)

    def check_document(self, what: str, size: int) -> None:
        """Raises TooLarge when ``size`` (bytes or characters of one document) is over max_document_mb."""
        if size > self.document_chars:
            raise TooLarge(what, size, "max_document_mb", self.max_document_mb)

    def check_expansion(self, what: str, size: int) -> None:
        """Raises TooLarge when ``size`` (decompressed bytes) is over max_decompressed_mb."""
        if size > self.decompressed_bytes:
            raise TooLarge(what, size, "max_decompressed_mb", self.max_decompressed_mb)

    def check_zip(self, data: bytes) -> None:
        """Refuses a zip (.docx) whose members declare more than max_decompressed_mb in total, from its
        central directory alone: nothing is decompressed. ``zipfile`` never returns more bytes than a
        member declares (it stops there and fails the CRC), so the declared sizes bound the real ones.
        Bytes that are not a zip are left to the reader, which reports them unreadable."""
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                declared = sum(info.file_size for info in archive.infolist())
        except (zipfile.BadZipFile, OSError, ValueError):
            return
        self.check_expansion("the unpacked .docx/zip (sizes its members declare)", declared)


def too_large(exc: TooLarge, *, dataset: str, file: str, record: str | None = None) -> DatasetError:
    """The named error of a limit: what, how big, the key, and the fix (raise the key)."""
    need = math.ceil(exc.size / MB) + 1
    return DatasetError(
        f"{exc.what} is {exc.size / MB:.3g} MB, over the limit dataset.{exc.key}={exc.limit_mb:g}",
        dataset=dataset, file=file, record=record,
        fix=f"if you trust this file, raise the limit (dataset.{exc.key}={need}); otherwise remove the file",
    )
