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
