"""Prints one of the README's marked commands, so CI runs exactly what the README tells a user to run.

The README marks each command with an HTML comment right before its fenced block:
``<!-- ci:install -->``, ``<!-- ci:quick -->`` and ``<!-- ci:test -->``. Usage: ``python .ci/readme_commands.py install``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"<!-- ci:(?P<name>[a-z]+) -->\s*\n```(?:bash|sh)?\n(?P<body>.*?)\n```", re.DOTALL)


def commands(text: str) -> dict[str, str]:
    """Marker name -> the command in the fenced block after it (one line, comments and blanks dropped)."""
    out: dict[str, str] = {}
    for m in BLOCK.finditer(text):
        lines = [ln for ln in m["body"].splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if len(lines) != 1:
            raise SystemExit(f"README.md: the block after <!-- ci:{m['name']} --> must hold one command, "
                             f"found {len(lines)}")
        out[m["name"]] = lines[0].strip()
    return out


def main(argv: list[str]) -> int:
    found = commands(README.read_text(encoding="utf-8"))
    if len(argv) != 1 or argv[0] not in found:
        print(f"usage: readme_commands.py {{{'|'.join(sorted(found))}}}", file=sys.stderr)
        return 2
    print(found[argv[0]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
