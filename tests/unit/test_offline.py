"""ragbench.offline: every entry point's offline defaults; a variable the user set wins."""

from __future__ import annotations

import io
import os
import sys

import pytest

from ragbench import offline


def test_defaults_are_set_and_the_user_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [*offline.DEFAULTS, *offline.NO_TERMINAL]:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user's own choice
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal: no progress bars
    offline.set_defaults()
    assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"
    assert os.environ["TQDM_DISABLE"] == "1"
