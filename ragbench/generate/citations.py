"""Citation markers: ``[ref_N]`` (also ``[ref_1, ref_3]``, ``[ref_1][ref_2]``) parsed out of an answer."""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

_GROUP = re.compile(r"\s*\[\s*(ref_?\s*\d+(?:\s*[,;]\s*(?:ref_?\s*)?\d+)*)\s*\]", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?])")
# a sentence ends at . ! ? (and the markers right after it, which are its own) before a space or the end
_SENTENCE_END = re.compile(r"[.!?](?:\s*\[\s*ref[^\]]*\])*(?=\s|$)", re.IGNORECASE)


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


def cited_sentences(text: str, n_contexts: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Each sentence of the reply that carries a valid marker: (its text without markers, the context
    numbers it cites, in order). A sentence ends at ``.``, ``!`` or ``?`` and the space after it; markers
    right after its end (``Paris. [ref_1] It...``) are its own. Used by the citation support check
    (``ragbench.judge.citations``)."""
    out = []
    cuts = [0, *(m.end() for m in _SENTENCE_END.finditer(text)), len(text)]
    for sentence in (text[a:b] for a, b in zip(cuts, cuts[1:], strict=False)):
        clean, cited = parse_citations(sentence, n_contexts)
        if cited and clean:
            out.append((clean, cited))
    return tuple(out)
