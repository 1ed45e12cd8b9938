"""Citation markers: ``[ref_N]`` (also ``[ref_1, ref_3]``, ``[ref_1][ref_2]``) parsed out of an answer."""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

_GROUP = re.compile(r"\s*\[\s*(ref_?\s*\d+(?:\s*[,;]\s*(?:ref_?\s*)?\d+)*)\s*\]", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?])")


def parse_citations(text: str, n_contexts: int) -> tuple[str, tuple[int, ...]]:
    """(answer without markers, cited context numbers in order of first citation).

    Numbers outside ``1..n_contexts`` are dropped (a model citing a reference it was not given cites
    nothing), and logged.
    """
    cited: list[int] = []
    invalid: list[int] = []
    for match in _GROUP.finditer(text):
        for raw in _NUMBER.findall(match.group(1)):
            n = int(raw)
            if 1 <= n <= n_contexts:
                if n not in cited:
                    cited.append(n)
            else:
                invalid.append(n)
    if invalid:
        log.debug("answer cites references %s outside ref_1..ref_%d; ignored", invalid, n_contexts)
    clean, removed = _GROUP.subn("", text)
    if removed:
        clean = _SPACE_BEFORE_PUNCT.sub(r"\1", clean)
    return clean.strip(), tuple(cited)
