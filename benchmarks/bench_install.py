"""What the README's install resolves to, without installing: pip's resolver in dry-run mode.

Prints the torch build each install picks here (and whether any NVIDIA/CUDA package comes along), and
what each extra adds: the packages beyond the base install and their installed size, measured from
this environment's files (a package not installed here is counted by its wheel's size, marked ``~``).

    python benchmarks/bench_install.py            # base, dev, ray, bench
    python benchmarks/bench_install.py dev        # one extra
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

REPO = Path(__file__).resolve().parents[1]


def resolve(spec: str) -> dict[str, dict]:
    """name -> install report item of ``pip install --dry-run --ignore-installed spec``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                        "--report", str(report), spec], check=True, cwd=REPO, stderr=subprocess.DEVNULL)
        items = json.loads(report.read_text())["install"]
    return {re.sub(r"[-_.]+", "-", i["metadata"]["name"]).lower(): i for i in items}


def installed_size(name: str, item: dict) -> tuple[float, bool]:
    """(MB, measured?) from this environment's RECORD, else the wheel file when it is local."""
    try:
        dist = md.distribution(name)
        total = 0
        for f in dist.files or []:
            try:
                total += os.path.getsize(dist.locate_file(f))
            except OSError:
                pass
        return total / 1e6, True
    except md.PackageNotFoundError:
        url = item.get("download_info", {}).get("url", "")
        if url.startswith("file://") and Path(unquote(urlparse(url).path)).is_file():
            return Path(unquote(urlparse(url).path)).stat().st_size / 1e6, False
        return 0.0, False


def main(argv: list[str]) -> None:
    extras = argv or ["dev", "ray", "bench"]
    t0 = time.perf_counter()
    base = resolve(".")
    torch = base.get("torch", {}).get("metadata", {}).get("version")
    cuda = sorted(n for n in base if n.startswith(("nvidia-", "cuda-", "triton")))
    base_mb = sum(installed_size(n, i)[0] for n, i in base.items() if n != "ragbench")
    print(f"base install '.': {len(base)} packages, torch {torch}, CUDA packages: {cuda or 'none'}, "
          f"{base_mb:,.0f} MB installed")
    for extra in extras:
        got = resolve(f".[{extra}]")
        added = {n: i for n, i in got.items() if n not in base}
        sizes = {n: installed_size(n, i) for n, i in added.items()}
        mb = sum(s for s, _ in sizes.values())
        biggest = sorted(sizes.items(), key=lambda kv: -kv[1][0])[:6]
        shown = ", ".join(f"{n} {'' if ok else '~'}{s:.0f}" for n, (s, ok) in biggest)
        print(f"'.[{extra}]' adds {len(added)} packages, {mb:,.0f} MB (largest, MB: {shown}); "
              f"ray included: {'ray' in got}")
    print(f"resolved in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
