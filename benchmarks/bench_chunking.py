"""Chunking time against document size, and the refusal of a .docx that expands to 300 MB.

    python benchmarks/bench_chunking.py [--sizes 1 2 4 8] [--kinds prose words dots] [--repeat 2]

Each document is ONE line of text, read as a custom dataset (``.txt``) and chunked by the hierarchical
chunker (load + chunk are timed together). Kinds: ``prose`` (short sentences, many cuts), ``words``
(no punctuation: one sentence cut at word boundaries), ``dots`` (a run of periods: the sentence-end
pattern's worst case). Linear time means the 8 MB / 1 MB time ratio is about 8 (quadratic: 64). Each
figure is the best of ``--repeat`` runs, in CPU seconds of this process (``time.process_time``; on a
shared machine wall time mostly measures the neighbours), with the wall time beside it.

Then a .docx whose ``word/document.xml`` declares 300 MB is put in a SyllabusQA copy
(``syllabus_format=word``) and loaded: it must be refused (``dataset.max_decompressed_mb``) in < 1 s.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

MB = 1_000_000
PATTERNS = {
    "prose": "The ferry left at 7.15 a.m. from the north pier. Dr. Smith said so! Was it late? No. ",
    "words": "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor ",
    "dots": ".",
}


def one_line(kind: str, size: int) -> str:
    unit = PATTERNS[kind]
    text = (unit * (size // len(unit) + 1))[:size]
    return text + " End" if kind == "dots" else text


def time_chunking(folder: Path, kind: str, mb: int, repeat: int) -> tuple[float, float, int]:
    from ragbench.datasets.custom import CustomAdapter
    from ragbench.ingest.hierarchical import HierarchicalChunker

    root = folder / f"{kind}-{mb}"
    root.mkdir()
    (root / "doc.txt").write_text(one_line(kind, mb * MB), encoding="utf-8")
    (root / "qa.jsonl").write_text(json.dumps({"question": "What?", "answers": ["End"]}) + "\n", encoding="utf-8")
    cpu, wall, chunks = math.inf, math.inf, 0
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        evalset = CustomAdapter(name="custom", path=str(root)).load()
        chunks = len(HierarchicalChunker().chunk(evalset.documents).chunks)
        cpu = min(cpu, time.process_time() - start_cpu)
        wall = min(wall, time.perf_counter() - start)
        del evalset
    return cpu, wall, chunks


def docx_bomb(path: Path, expanded_mb: int) -> None:
    """A .docx (zip) whose document.xml holds ``expanded_mb`` MB of spaces (deflated to ~0.1% of that)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        with z.open("word/document.xml", "w", force_zip64=True) as member:
            block = b" " * MB
            for _ in range(expanded_mb):
                member.write(block)


def time_docx_refusal(folder: Path, expanded_mb: int) -> tuple[float, int, str]:
    from ragbench.datasets.base import bundled_sample
    from ragbench.datasets.syllabusqa import SyllabusQAAdapter
    from ragbench.errors import DatasetError

    root = folder / "syllabusqa"
    shutil.copytree(bundled_sample("syllabusqa"), root)
    word = root / "syllabi/syllabi_redacted/word"
    victim = sorted(word.glob("*.docx"))[0]
    victim.chmod(0o644)
    docx_bomb(victim, expanded_mb)
    import docx  # noqa: F401 - imported before the clock starts: the refusal, not the import, is timed

    start = time.perf_counter()
    try:
        SyllabusQAAdapter(name="syllabusqa", path=str(root), split="all", syllabus_format="word").load()
        outcome = "ACCEPTED (bug)"
    except DatasetError as exc:
        outcome = str(exc).splitlines()[0]
    seconds = time.perf_counter() - start
    from ragbench.datasets.limits import Limits, TooLarge

    data = victim.read_bytes()
    start = time.perf_counter()
    try:
        Limits().check_zip(data)
    except TooLarge:
        pass
    check = time.perf_counter() - start
    return seconds, check, victim.stat().st_size, outcome


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[1, 2, 4, 8])
    parser.add_argument("--kinds", nargs="+", default=list(PATTERNS), choices=list(PATTERNS))
    parser.add_argument("--bomb-mb", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for kind in args.kinds:
            times = {}
            for mb in args.sizes:
                seconds, wall, chunks = time_chunking(folder, kind, mb, args.repeat)
                times[mb] = seconds
                print(f"{kind:6s} {mb:2d} MB one line: {seconds:7.2f} CPU s  ({seconds / mb:.2f} s/MB; wall "
                      f"{wall:.2f} s; {chunks} chunks)", flush=True)
            if not times:
                continue
            lo, hi = min(times), max(times)
            print(f"RATIO {kind}: {hi} MB / {lo} MB CPU time = {times[hi] / times[lo]:.2f} (linear = {hi / lo:g}, "
                  f"quadratic = {(hi / lo) ** 2:g})", flush=True)
        seconds, check, size, outcome = time_docx_refusal(folder, args.bomb_mb)
        print(f"docx of {size / MB:.2f} MB expanding to {args.bomb_mb} MB: the whole SyllabusQA load refused in "
              f"{seconds:.3f} s wall (target < 1 s); the zip check alone {check * 1000:.2f} ms")
        print(f"  {outcome}")


if __name__ == "__main__":
    main()
