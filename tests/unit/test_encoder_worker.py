"""``ragbench.embed.worker``: the encoder in a forked worker, and what happens when it fails. Each case
forks a real worker whose "model" is a fake (no torch: a few milliseconds each); the real model's
vectors through the worker are compared with the process's in tests/integration/test_encoder_worker.py."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from ragbench.embed import sentence_transformer, worker
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder
from ragbench.embed.worker import EncoderWorker, WorkerGone
from ragbench.errors import ModelLoadError
from ragbench.tracking import background

pytestmark = pytest.mark.skipif(not background.can_fork(), reason="fork-based worker: Linux only")
TESTS = os.getpid()


class FakeModel:
    """A SentenceTransformer stand-in: row i is (len(text i), batch_size, the encoding process's pid)."""

    def __init__(self, source: str, device: str | None, max_seq_length: int | None) -> None:
        if source == "missing":
            raise OSError("no such model: missing")
        self.key = (source, device, max_seq_length)

    def get_sentence_embedding_dimension(self) -> int:
        return 3

    def encode(self, texts, **options):
        if texts == ["boom"]:
            raise RuntimeError("out of memory")
        if texts == ["die"] and os.getpid() != TESTS:  # the worker dies; the process encodes it
            os.kill(os.getpid(), signal.SIGKILL)
        if texts == ["slow"] and os.getpid() != TESTS:
            time.sleep(30)
        return np.array([[len(t), options.get("batch_size", 0), os.getpid()] for t in texts], dtype=np.float32)


def _fake_worker(prepare=lambda: None) -> EncoderWorker:
    return EncoderWorker(prepare=prepare, factory=FakeModel)


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.fixture()
def running(monkeypatch):
    """A fake worker installed as the process's worker; stopped afterwards."""
    w = _fake_worker()
    monkeypatch.setattr(worker, "_WORKER", w)
    yield w
    w.stop()


def test_the_worker_encodes_in_its_own_process():
    w = _fake_worker()
    pid = w.pid
    try:
        model = w.model("src", "cpu", None)
        assert model.get_embedding_dimension() == 3
        out = model.encode(["ab", "c"], batch_size=7)
        assert out.tolist() == [[2, 7, pid], [1, 7, pid]] and pid != os.getpid()
    finally:
        w.stop()
    assert not w.alive and w.pid is None and w.problem is None and _reaped(pid)


def test_the_worker_ignores_ctrl_c_and_the_process_stops_it():
    w = _fake_worker()
    try:
        model = w.model("src", "cpu", None)
        os.kill(w.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
        time.sleep(0.1)
        assert model.encode(["abc"])[0, 0] == 3
    finally:
        w.stop()


@pytest.mark.parametrize("fault, message, alive", [
    ("import fails", r"did not import there \(ImportError: No module named 'torch'\)", True),
    ("model missing", r"OSError: no such model: missing", True),
    ("encode raises", r"RuntimeError: out of memory", True),
    ("worker killed", r"the worker stopped \(EOFError\); stopped by signal 9", False),
    ("load not answered in time", r"no reply within 0.5 s", False),
])
def test_each_fault_is_named_in_a_worker_gone(fault, message, alive):
    def prepare():
        if fault == "import fails":
            raise ImportError("No module named 'torch'")
        if fault == "load not answered in time":
            time.sleep(30)

    w = _fake_worker(prepare)
    pid = w.pid
    try:
        with pytest.raises(WorkerGone, match=message):
            if fault in ("import fails", "load not answered in time"):
                w.model("src", "cpu", None, timeout_s=0.5)
            elif fault == "model missing":
                w.model("missing", "cpu", None)
            else:
                w.model("src", "cpu", None).encode(["boom" if fault == "encode raises" else "die"])
        assert w.alive == alive
        if alive and fault == "encode raises":  # an answered error leaves the worker serving
            assert w.model("src", "cpu", None).encode(["ab"])[0, 0] == 2
    finally:
        w.stop()
    assert _reaped(pid)


def test_an_interrupt_while_waiting_stops_the_worker():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGUSR1, interrupt)
    w = _fake_worker()
    pid = w.pid
    try:
        model = w.model("src", "cpu", None)
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        with pytest.raises(KeyboardInterrupt):
            model.encode(["slow"])
    finally:
        signal.signal(signal.SIGUSR1, before)
    assert not w.alive and "interrupted while it worked" in str(w.problem) and _reaped(pid)
    with pytest.raises(WorkerGone, match="interrupted"):
        model.encode(["ab"])


def test_the_worker_leaves_when_the_process_is_gone():
    w = _fake_worker()
    pid = w.pid
    w._conn.close()  # what the process's death does to the pipe
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    pytest.fail("the worker did not exit when its pipe closed")


def test_start_is_once_a_process_and_a_forked_child_sees_no_worker(monkeypatch):
    monkeypatch.setattr(worker, "_WORKER", None)
    first = worker.start(prepare=lambda: None, factory=FakeModel)
    try:
        assert first is not None and worker.start() is first and worker.current() is first
        child = background.Child(lambda: b"none" if worker.current() is None else b"inherited")
        assert child.result(10) == b"none"
    finally:
        worker.stop()
    assert worker.current() is None and not first.alive


def test_a_failing_fork_means_no_worker(monkeypatch):
    monkeypatch.setattr(worker, "_WORKER", None)

    def no_fork():
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    assert worker.start() is None and worker.current() is None


# --- the embedder with and without the worker ---------------------------------------------------------


def _embedder(**kwargs) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(show_progress=False, batch_size=4, **{"worker": True, **kwargs})


def test_the_embedder_encodes_in_the_worker(running, monkeypatch):
    monkeypatch.setattr(sentence_transformer, "shared_model", lambda *a: pytest.fail("loaded in the process"))
    emb = _embedder()
    vecs = emb.embed_documents(["ab", "c", "def"])
    assert emb.dim == 3 and vecs.dtype == np.float32 and vecs.flags.c_contiguous
    assert vecs.tolist() == [[2, 4, running.pid], [1, 4, running.pid], [3, 4, running.pid]]
    assert emb.embed_queries(["q"]).tolist() == [[1, 4, running.pid]]


def test_embedder_worker_false_encodes_in_the_process(running, monkeypatch):
    monkeypatch.setattr(sentence_transformer, "shared_model", FakeModel)
    assert _embedder(worker=False).embed_documents(["ab"]).tolist() == [[2, 4, os.getpid()]]


def test_a_worker_dying_mid_job_falls_back_to_the_process(running, monkeypatch, caplog):
    monkeypatch.setattr(sentence_transformer, "shared_model", FakeModel)
    emb = _embedder()
    assert emb.embed_documents(["ab"])[0, 2] == running.pid
    with caplog.at_level(logging.WARNING):
        out = emb.embed_documents(["die"])  # the worker is killed by this call; the process encodes it
    assert out.tolist() == [[3, 4, os.getpid()]]
    assert "the encoder worker failed (the worker stopped (EOFError); stopped by signal 9)" in caplog.text
    assert emb.embed_documents(["ab"])[0, 2] == os.getpid() and worker.current() is None


def test_a_model_the_worker_cannot_load_fails_as_in_the_process(running, monkeypatch):
    monkeypatch.setattr(sentence_transformer, "shared_model", FakeModel)
    monkeypatch.setattr(sentence_transformer, "resolve_model", lambda model, package: ("missing", "hub"))
    with pytest.raises(ModelLoadError, match=r"cannot load embedding model 'missing': no such model: missing"):
        _ = _embedder().dim
    assert running.alive  # it answered; a later job may load another model there


# --- when a worker is started ----------------------------------------------------------------------------

DENSE = {"_target_": "ragbench.retrieval.dense.FaissRetriever"}
BM25 = {"_target_": "ragbench.retrieval.bm25.BM25Retriever"}


def _config(embedder=worker.ENCODER, retriever=None, launcher=worker.BASIC_LAUNCHER, **embedder_keys):
    return OmegaConf.create({
        "embedder": {"_target_": embedder, "worker": True, **embedder_keys},
        "retrieval": {"retriever": DENSE if retriever is None else retriever},
        "hydra": {"launcher": {"_target_": launcher}},
    })


JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"


@pytest.mark.parametrize("config, multirun, reason", [
    (_config(), True, None),
    (_config(), False, None),
    (_config(launcher=JOBLIB), True, "the jobs run in the launcher's processes"),
    (_config(launcher=JOBLIB), False, None),  # a single run runs here whatever the launcher
    (_config(embedder="ragbench.embed.api.APIEmbedder"), True, "the embedder is not sentence-transformers"),
    (_config(worker=False), True, "embedder.worker=false"),
    (_config(retriever=BM25), True, "the retriever needs no vectors"),
    (_config(retriever={"_target_": "ragbench.retrieval.baselines.Oracle"}), True,
     "the retriever needs no vectors"),
    (_config(retriever={"_target_": "ragbench.retrieval.hybrid.RRFRetriever", "children": [DENSE, BM25]}),
     True, None),
    (_config(retriever={"_target_": "ragbench.retrieval.hybrid.RRFRetriever", "children": [BM25, BM25]}),
     True, "the retriever needs no vectors"),
    (_config(retriever={"index": "flat"}), True, "the retriever's config does not say"),
    (_config(retriever={"_target_": "ragbench.retrieval.nowhere.Gone"}), True,
     "the retriever's config does not say"),
], ids=["sweep", "single run", "joblib sweep", "joblib single run", "api embedder", "worker false", "bm25",
        "oracle", "hybrid with dense", "hybrid bm25 only", "no target", "unknown target"])
def test_when_a_worker_starts(config, multirun, reason, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # this process's state is not the config's
    monkeypatch.setattr(threading, "active_count", lambda: 1)  # a thread another test left running
    got = worker.why_not(config, multirun=multirun)
    assert got == reason if reason is None else got is not None and got.startswith(reason)


@pytest.mark.parametrize("state, reason", [
    ("torch", "torch is imported already"),
    ("thread", "another thread runs"),
    ("no fork", "no fork() on this platform"),
])
def test_no_worker_where_a_fork_is_not_safe(state, reason, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    if state == "torch":
        monkeypatch.setitem(sys.modules, "torch", object())
    if state == "thread":
        monkeypatch.setattr(threading, "active_count", lambda: 2)
    if state == "no fork":
        monkeypatch.setattr(background, "can_fork", lambda: False)
    assert str(worker.why_not(_config(), multirun=True)).startswith(reason)


@pytest.mark.parametrize("enabled, started", [(True, True), (False, False)])
def test_the_callback_starts_and_stops_the_worker(enabled, started, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(worker, "why_not", lambda config, multirun: None)
    monkeypatch.setattr(worker, "start", lambda: calls.append("start"))
    monkeypatch.setattr(worker, "stop", lambda: calls.append("stop"))
    callback = worker.EncoderWorkerCallback(enabled=enabled)
    callback.on_multirun_start(_config())
    callback.on_multirun_end(_config())
    callback.on_run_start(_config())
    callback.on_run_end(_config())
    assert calls == (["start", "stop"] * 2 if started else ["stop"] * 2)


def test_the_worker_is_opt_in():
    """Off unless asked for (``embedder.worker=true``): it buys wall time on a cold run, not CPU, and on a
    warm cache it only imports the encoder (benchmarks/bench_warm_cpu.py)."""
    shipped = OmegaConf.load(Path(worker.__file__).resolve().parents[1] / "conf" / "embedder" / "minilm.yaml")
    assert shipped.worker is False and SentenceTransformerEmbedder().worker is False
    assert worker.why_not(OmegaConf.merge(_config(), {"embedder": shipped}), multirun=True) == "embedder.worker=false"
