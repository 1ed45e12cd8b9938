"""``embedder.backend=auto`` (issue 46 item 1): which backend it picks and why, the verdict kept once per
model, torch's identity (index keys), the ``ragbench.embedder_backend`` tag, and ``python -m ragbench.embed
prepare``'s one-line errors. The export and the probe are stand-ins here (no torch in the unit suite); the
real model: tests/integration/test_auto_backend.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from ragbench.embed import auto
from ragbench.embed.api import APIEmbedder
from ragbench.embed.prepare import main as prepare_main
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder
from ragbench.errors import ConfigError, ModelLoadError


class Probe:
    """Stand-ins for the export and the cosine measurement, counting calls."""

    def __init__(self, cosine: dict[str, float], fail: frozenset[str] = frozenset()) -> None:
        self.cosine, self.fail, self.measured, self.exported = cosine, fail, [], 0

    def export(self, source: str, revision: str) -> Path:
        self.exported += 1
        if "export" in self.fail:
            raise ModelLoadError(f"cannot export {source!r} to ONNX: unsupported op; fix: use torch")
        return Path("/cache/onnx_models/k/model.onnx")

    def measure(self, source: str, path: Path, backend: str, max_seq: int | None) -> float:
        self.measured.append(backend)
        return self.cosine[backend]

    def choose(self, root: Path, **kw) -> auto.Choice:
        return auto.choose("/weights", "gt==0.1", device=kw.pop("device", "cpu"), max_seq_length=None,
                           root=root, export=self.export, measure=self.measure,
                           export_id=lambda s, r: "export-key", **kw)


@pytest.fixture
def installed(monkeypatch):
    """Which runtimes count as installed: onnx only, unless a test says otherwise."""
    have = {"onnx"}
    monkeypatch.setattr(auto, "missing_runtime", lambda b: [] if b in have else [auto.RUNTIMES[b][0]])
    return have


def test_auto_picks_onnx_when_its_vectors_equal_torchs_and_keeps_the_verdict(tmp_path, installed):
    probe = Probe({"onnx": 0.99999998})
    choice = probe.choose(tmp_path)
    assert (choice.backend, choice.exported) == ("onnx", Path("/cache/onnx_models/k/model.onnx"))
    assert choice.tag == (f"onnx: onnxruntime {auto.runtime_version('onnx')}, min cosine to torch 1.0000000 "
                          ">= 0.99999 (15 texts)")
    [stored] = (tmp_path / auto.STAGE).iterdir()
    assert json.loads(stored.read_text())["min_cosine"] == 0.99999998
    again = Probe({"onnx": 0.0})  # a second process: the stored verdict answers, nothing is measured
    assert again.choose(tmp_path).backend == "onnx" and again.measured == []


def test_auto_takes_the_fastest_passing_backend_and_falls_back_to_torch(tmp_path, installed):
    installed.add("openvino")
    probe = Probe({"openvino": 0.9999, "onnx": 0.999995})
    choice = probe.choose(tmp_path)
    assert choice.backend == "onnx" and probe.measured == ["openvino", "onnx"]
    none_pass = Probe({"openvino": 0.9999, "onnx": 0.9998}).choose(tmp_path / "other")
    assert none_pass == auto.Choice("torch", "openvino min cosine to torch 0.9999000 < 0.99999; "
                                             "onnx min cosine to torch 0.9998000 < 0.99999")


def test_auto_falls_back_to_torch_without_a_runtime_off_the_cpu_or_when_the_export_fails(tmp_path, installed):
    installed.clear()
    assert Probe({}).choose(tmp_path) == auto.Choice(
        "torch", "openvino: openvino not installed; onnx: onnxruntime not installed")
    installed.add("onnx")
    gpu = Probe({"onnx": 1.0})
    assert gpu.choose(tmp_path, device="cuda").backend == "torch" and gpu.exported == 0
    broken = Probe({"onnx": 1.0}, fail=frozenset({"export"}))
    choice = broken.choose(tmp_path)
    assert choice == auto.Choice("torch", "openvino: openvino not installed; "
                                          "onnx failed: cannot export '/weights' to ONNX: unsupported op")
    assert not (tmp_path / auto.STAGE).exists()  # a failure is not kept: the next job tries again
    broken.choose(tmp_path)
    assert broken.exported == 2


def test_auto_is_the_default_and_keeps_torchs_identity():
    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        cfg = compose(config_name="config")
    assert cfg.embedder.backend == "auto"
    default, torch = SentenceTransformerEmbedder(), SentenceTransformerEmbedder(backend="torch")
    assert default.backend == "auto" and default.identity == torch.identity  # shared index keys
    assert SentenceTransformerEmbedder(backend="onnx").identity == torch.identity + "|backend=onnx"
    with pytest.raises(ConfigError, match=r"embedder.quantize=true needs embedder.backend=onnx or openvino"):
        SentenceTransformerEmbedder(backend="auto", quantize=True)


def test_the_base_install_carries_onnx_runtime_and_the_readme_prepares_it():
    import tomllib

    root = Path(__file__).resolve().parents[2]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    assert {d.split(">")[0].split("=")[0] for d in deps} >= {"onnxruntime", "onnx"}
    assert "&& python -m ragbench.embed prepare" in (root / "README.md").read_text()


def test_the_backend_tag_says_what_encoded_and_why():
    e = SentenceTransformerEmbedder()
    assert auto.backend_tag(e) == {auto.TAG: "auto: not loaded (every vector came from the cache)"}
    e.choice = auto.Choice("onnx", "min cosine to torch 1.0000000 >= 0.99999 (15 texts)")
    assert auto.backend_tag(e) == {auto.TAG: "onnx: min cosine to torch 1.0000000 >= 0.99999 (15 texts)"}
    forced = SentenceTransformerEmbedder(backend="onnx", quantize=True)
    assert auto.backend_tag(forced) == {auto.TAG: "onnx-qint8: set by embedder.backend"}
    assert auto.backend_tag(APIEmbedder(model="openai/text-embedding-3-small")) == {}


@pytest.mark.parametrize(("argv", "line"), [
    ([], "ragbench.embed: the following arguments are required: command; "
         "fix: python -m ragbench.embed prepare [embedder.K=V]"),
    (["prepare", "dataset=qasper"],
     "ragbench.embed: [RB-CONFIG-001] 'dataset=qasper' is not an embedder.* override; fix: drop it"),
    (["prepare", "embedder.nope=1"], "ragbench.embed: [RB-CONFIG-001] Could not override 'embedder.nope'; "
                                     "fix: python -m ragbench.embed prepare [embedder.K=V]"),
    (["prepare", "embedder.backend=tensorrt"],
     "ragbench.embed: [RB-CONFIG-001] embedder.backend='tensorrt' is not one of auto, torch, onnx, openvino"),
])
def test_prepare_answers_bad_input_with_one_line_and_exit_2(argv, line, capsys):
    try:
        code = prepare_main(argv)
    except SystemExit as exc:  # argparse's own exit
        code = exc.code
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [line]
