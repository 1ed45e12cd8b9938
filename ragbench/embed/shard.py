"""``embedder.shard=i/n``: which contiguous slice of a corpus's texts a ``stages=encode`` job encodes.

A corpus's vectors are encoded in blocks (one encode call each: the whole corpus when it has at most
``spill_rows`` texts, else blocks of ``spill_rows``, ``ragbench.retrieval.vectors``). A shard is a run of
whole blocks, so each text is encoded in the very call a full encode would put it in and the shards'
vectors, concatenated, are the full encode's bytes. Shards never enter a key of the searching job."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ragbench.errors import ConfigError

KEY = "embedder.shard"
_FORM = re.compile(r"\s*(-?\d+)\s*/\s*(-?\d+)\s*")


@dataclass(frozen=True)
class EncodeShard:
    """Shard ``index`` of ``count`` (0-based): ``embedder.shard=index/count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ConfigError(f"{KEY}={self.label}: the number of shards must be at least 1; fix: "
                              f"{KEY}=0/1 (the whole corpus) or {KEY}=0/4,1/4,2/4,3/4 in a -m sweep")
        if not 0 <= self.index < self.count:
            raise ConfigError(f"{KEY}={self.label}: shard numbers run from 0 to {self.count - 1} for {self.count} "
                              f"shards; fix: {KEY}={sweep_values(self.count)} in a -m sweep")

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def rows(self, total: int, spill_rows: int) -> range:
        """This shard's rows of a corpus of ``total`` texts: whole encode blocks (possibly none)."""
        block = encode_block(total, spill_rows)
        blocks = -(-total // block) if total else 0
        first, last = self.index * blocks // self.count, (self.index + 1) * blocks // self.count
        return range(min(first * block, total), min(last * block, total))


def encode_block(total: int, spill_rows: int) -> int:
    """Texts per encode call of a full encode of ``total`` texts (as ``Pipeline._vectors`` makes them)."""
    return max(1, total if total <= spill_rows else spill_rows)


def sweep_values(count: int) -> str:
    """``0/4,1/4,2/4,3/4``: every shard of ``count``, as a -m sweep value."""
    return ",".join(f"{i}/{count}" for i in range(count))


def parse_shard(value: Any) -> EncodeShard | None:
    """``embedder.shard`` as an EncodeShard (None: not sharded), or a one-line ConfigError with the fix."""
    if value is None:
        return None
    if isinstance(value, EncodeShard):
        return value
    match = _FORM.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ConfigError(f"{KEY}={value!r} is not of the form i/n (shard i of n, from 0); fix: {KEY}=0/4,1/4,2/4,3/4 "
                          "in a -m sweep with stages=encode, or drop it")
    return EncodeShard(int(match.group(1)), int(match.group(2)))


def shard_of(embedder: Any) -> EncodeShard | None:
    """The shard an embedder was configured to encode (``embedder.shard``); None for a full encode."""
    value = getattr(embedder, "shard", None)
    return value if isinstance(value, EncodeShard) else None
