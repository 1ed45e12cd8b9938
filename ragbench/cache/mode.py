"""What the cache may do: the one mode of every record in the store (stage entries, answers, verdicts, LLM replies)."""

from __future__ import annotations

from enum import Enum

from ragbench.errors import ConfigError


class CacheMode(str, Enum):
    """read_write: use and fill; refresh: rebuild and overwrite; read_only: use, never write; off."""

    READ_WRITE = "read_write"
    REFRESH = "refresh"
    READ_ONLY = "read_only"
    OFF = "off"

    @classmethod
    def parse(cls, value: str | bool, *, key: str = "cache.mode") -> CacheMode:
        """A mode from its name; ``True``/``False`` (a YAML boolean) mean read_write/off."""
        if isinstance(value, cls):
            return value
        if isinstance(value, bool):
            return cls.READ_WRITE if value else cls.OFF
        try:
            return cls(str(value))
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise ConfigError(f"{key}={value!r} is not valid; choose one of: {valid}") from None

    @property
    def reads(self) -> bool:
        return self in (CacheMode.READ_WRITE, CacheMode.READ_ONLY)

    @property
    def writes(self) -> bool:
        return self in (CacheMode.READ_WRITE, CacheMode.REFRESH)
