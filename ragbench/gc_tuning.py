"""Keep the cyclic garbage collector off the objects that live as long as the process.

Importing torch, sentence-transformers and MLflow creates ~800,000 objects that never die, and each
batch of them triggers a full collection that scans everything alive: thirteen full collections took
1.3 s of a 25 s design-card sweep, all of them inside those imports (measured with ``gc.callbacks``).
``long_lived()`` pauses the collector while such a load runs, then moves what it created into the
permanent generation (``gc.freeze()``), so later collections only scan what jobs create. Frozen objects
are still freed by reference counting; only reference cycles among them are never collected, which is
what a module or a loaded model is anyway.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def long_lived() -> Iterator[None]:
    """Around an import or a model load whose objects stay for the whole process."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


# Generation-0 threshold for a ragbench process (CPython's default is 700). A job allocates millions of
# short-lived objects (hits, case records, JSON rows) while holding large live structures (a chunk tree,
# the cases), so at 700 the collector runs thousands of times and every few dozen runs a full collection
# that rescans all of it: 28 full collections took 2.5 s of a 94 s full-LoCoMo sweep (6 jobs). At 50,000
# the same sweep runs 36 young collections and no full one (0.8 s in all). Cycles are still collected,
# only later; objects without cycles are freed by reference counting either way.
THRESHOLDS = (50_000, 20, 10)


def for_batch_work() -> None:
    """Sets ``THRESHOLDS`` (the ``python -m ragbench`` process; a library user keeps their own)."""
    gc.set_threshold(*THRESHOLDS)
