"""``llm=local`` on a machine that lacks what it needs: one line naming the missing piece and the fix, never a
traceback, and nothing loaded. torch is never imported here: a stand-in answers for it where a device is
asked about."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ragbench.errors import ConfigError
from ragbench.llm.local import engine
from ragbench.llm.local.source import EXTRA, ModelSource


@pytest.mark.parametrize("absent", ["torch", "transformers", "gguf", "accelerate"])
def test_a_missing_piece_of_the_local_extra_is_named_with_the_install_line(monkeypatch, absent):
    # the others present (whatever this venv holds: the README's install has no gguf or accelerate)
    monkeypatch.setattr(
        engine.importlib.util, "find_spec", lambda name, *a: None if name == absent else object()
    )
    with pytest.raises(ConfigError) as err:
        engine.pick_device("auto", "judge")
    message = str(err.value)
    assert message == f"judge=local needs {absent}, not installed; fix: {EXTRA}"


def test_load_stops_at_the_missing_extra_before_reading_any_weights(monkeypatch, tmp_path):
    monkeypatch.setattr(engine.importlib.util, "find_spec", lambda name, *a: None)
    source = ModelSource(name="local/x", folder=str(tmp_path), gguf_file="absent.gguf", kind="gguf")
    with pytest.raises(
        ConfigError, match=r"^llm=local needs torch, transformers, gguf, accelerate, not installed"
    ):
        engine.load(source)


def _torch(*, cuda: bool, cuda_build: str | None) -> Any:
    return SimpleNamespace(
        cuda=SimpleNamespace(is_available=lambda: cuda),
        version=SimpleNamespace(cuda=cuda_build),
        __version__="2.13.0+cpu" if cuda_build is None else "2.13.0+cu124",
    )


@pytest.mark.parametrize(
    ("build", "reason"), [(None, "a CPU-only build of torch"), ("12.4", "no visible CUDA device")]
)
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_asking_for_cuda_where_torch_sees_none_says_why_and_how_to_fix(monkeypatch, build, reason, device):
    monkeypatch.setattr(engine, "_torch", lambda role: _torch(cuda=False, cuda_build=build))
    with pytest.raises(ConfigError) as err:
        engine.pick_device(device, "llm")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"llm.device={device} but torch sees no CUDA device ({reason}")
    assert "fix: llm.device=auto (or cpu), or install a CUDA build of torch" in message


def test_auto_picks_cuda_when_torch_sees_a_device_and_the_cpu_otherwise(monkeypatch):
    monkeypatch.setattr(engine, "_torch", lambda role: _torch(cuda=True, cuda_build="12.4"))
    assert engine.pick_device("auto", "llm") == "cuda"
    assert engine.pick_device("cuda:1", "llm") == "cuda:1"
    monkeypatch.setattr(engine, "_torch", lambda role: _torch(cuda=False, cuda_build=None))
    assert engine.pick_device("auto", "llm") == "cpu"


@pytest.mark.parametrize("device", ["gpu", "CUDA", "mps0", ""])
def test_a_device_name_that_is_not_one_is_refused_before_torch_is_asked(monkeypatch, device):
    monkeypatch.setattr(engine, "_torch", lambda role: pytest.fail("torch asked about a bad device name"))
    with pytest.raises(ConfigError, match=r"^llm.device=.* is not valid; choose one of"):
        engine.pick_device(device, "llm")
