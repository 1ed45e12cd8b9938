"""What a run's cost figure rests on, as the run tag ``ragbench.cost_basis``: a 0 USD must never read as "free"
when nothing priced it.

- ``priced``: every model the job calls has a price in litellm's offline cost map (``cost/*_usd`` is its bill);
- ``unpriced``: some model has none (or a price of 0): its calls are booked at 0 USD, the total is a lower bound;
- ``local``: every model runs on this machine (a component declaring ``cost_basis = "local"``): 0 USD by nature;
- ``none``: the job calls no model (``llm=extractive``, ``judge=lexical``).

``unpriced`` wins over the others (the figure misses something), then ``priced`` (a priced bill plus local work
that costs nothing is a whole bill), then ``local``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

from ragbench.llm.loader import litellm

TAG = "ragbench.cost_basis"
BASES = ("priced", "unpriced", "local", "none")


@runtime_checkable
class CostBasis(Protocol):
    """A component that says what its calls cost: ``cost_basis = "local"`` for a model run in this process or
    started by ragbench on this machine (``llm=local``)."""

    cost_basis: str


def has_price(model: str) -> bool:
    """Whether litellm's offline cost map gives ``model`` a price above 0 (1,000 prompt + 1,000 completion
    tokens); a model it does not map, or maps at 0 (``ollama/...``), has none."""
    lib = litellm()
    try:
        prompt, completion = lib.cost_per_token(model=model, prompt_tokens=1000, completion_tokens=1000)
    except Exception:  # noqa: BLE001 - litellm raises several types for a model it does not map
        return False
    return float(prompt) + float(completion) > 0


def cost_basis(models: Iterable[str], *, local: int = 0, price: Callable[[str], bool] = has_price) -> str:
    """The tag's value for a job calling ``models`` (litellm model strings) and ``local`` local models."""
    names = sorted(set(models))
    if any(not price(m) for m in names):
        return "unpriced"
    if names:
        return "priced"
    return "local" if local else "none"
