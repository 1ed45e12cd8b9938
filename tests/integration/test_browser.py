"""What a user sees, in a real browser: a small real sweep, ``ragbench ui`` on a free port, and headless
Chromium (Debian's, driven by Playwright) on the printed runs view, on the sweep's report.html and on its
traces (MLflow's Traces tab, one trace opened: its retrieved documents and a judge's rationale).

Screenshots go to $RAGBENCH_SCREENSHOTS (default: the test's tmp folder); CI keeps them as artifacts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragbench.ui import traces_search

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium() -> str | None:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("RAGBENCH_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser():
    path = chromium()
    if path is None:
        pytest.skip("no Chromium: install it (Debian: apt-get install chromium; .ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A real two-job top-k sweep (bm25, no model) in a fresh folder; returns (folder, its stdout)."""
    cwd = tmp_path_factory.mktemp("browser")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "ragbench", "-m", "dataset=qasper", "dataset.sample_size=8",
                           "retrieval=bm25", "retrieval.topk=3,5"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cwd, proc.stdout


@pytest.fixture(scope="module")
def ui(sweep):
    """``ragbench ui`` on a free port; yields the lines it printed once the server answered."""
    cwd, _ = sweep
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "ragbench", "ui", "--port", str(port), "--no-browser"], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if line.startswith("serving"):
            break
    try:
        assert lines and lines[-1].startswith("serving"), (lines, proc.stderr.read() if proc.poll() is not None else "")
        yield lines
    finally:
        proc.send_signal(signal.SIGTERM)  # it stops the server's process group on its way out
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_sweep_prints_its_view_and_names_lead_with_topk(sweep):
    _, out = sweep
    url = re.search(r"this sweep's jobs in MLflow: .*? (http://\S+)", out)
    assert url and "viewStateShareKey=ragbench-sweep-" in url.group(1) and "workflowType=machine_learning" in url.group(1)
    assert "topk=3 #0" in out and "topk=5 #1" in out  # the table's labels: what varies, the job number


def test_runs_view_shows_the_jobs_with_headline_metrics(sweep, ui, browser, shots):
    from mlflow import MlflowClient

    cwd, _ = sweep
    jobs_url = next(line for line in ui if "its jobs:" in line).split("its jobs: ", 1)[1]
    assert "viewStateShareKey=" in jobs_url
    client = MlflowClient(tracking_uri=f"sqlite:///{cwd}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("ragbench")
    children = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("ragbench.role") == "job"]
    assert sorted(r.info.run_name.split(" ")[0] for r in children) == ["topk=3", "topk=5"]  # names lead with top-k
    page = browser.new_page(viewport={"width": 1600, "height": 900})
    page.goto(jobs_url)
    for run in children:
        page.get_by_text(run.info.run_name).first.wait_for(timeout=60_000)
    page.get_by_text("headline/answer_f1").first.wait_for(timeout=30_000)  # a metric column, no clicks
    text = page.inner_text("body")
    assert "Traces 0" not in text and "No data available" not in text  # not the GenAI overview
    for run in children:
        f1 = run.data.metrics["headline/answer_f1"]
        assert f"{f1:.4f}"[:5] in text or f"{f1:.3g}" in text, (f1, text[:2000])
    page.screenshot(path=str(shots / "mlflow_runs_view.png"))
    report_url = next(line for line in ui if line.startswith("its report:")).split(": ", 1)[1]
    page.goto(report_url)  # the sweep's report.html, drawn in MLflow's artifact pane
    page.frame_locator("iframe").first.get_by_text("Sweep table").first.wait_for(timeout=60_000)
    page.screenshot(path=str(shots / "mlflow_report_artifact.png"))
    page.close()


def test_report_table_sorts_and_drilldown_shows_hits_gold_and_answer(sweep, browser, shots):
    from mlflow import MlflowClient

    cwd, _ = sweep
    client = MlflowClient(tracking_uri=f"sqlite:///{cwd}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("ragbench")
    [parent] = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("ragbench.role") == "sweep"]
    names = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert "runs.csv" in names
    report = Path(client.download_artifacts(parent.info.run_id, "compare/report.html", dst_path=str(cwd / "dl")))
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(report.as_uri())
    table = page.locator("table.sweep").first
    head = table.locator("th")
    labels = [head.nth(i).inner_text() for i in range(head.count())]
    col = labels.index("hit@k")

    def column() -> list[float]:
        cells = table.locator(f"tbody tr td:nth-child({col + 1})")
        return [float(cells.nth(i).get_attribute("data-v")) for i in range(cells.count())]

    head.nth(col).click()
    assert column() == sorted(column())
    head.nth(col).click()
    assert column() == sorted(column(), reverse=True) and head.nth(col).get_attribute("aria-sort") == "descending"
    assert len(column()) == 2
    table.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "report_table.png"))
    records = page.locator("table.records th")
    assert "95% CI (unadjusted)" in [records.nth(i).inner_text() for i in range(records.count())]
    dd_head = page.locator("#dd-list thead th")
    a_b = [dd_head.nth(i).inner_text() for i in (3, 4)]  # each score column names its run and its score
    assert a_b[0].startswith("A: topk=") and a_b[0].endswith("(F1)") and a_b[1].startswith("B: topk=")
    page.locator("#dd-list tr.q").first.click()
    detail = page.locator("#dd-list .detail")
    text = detail.inner_text()
    assert "Gold answer:" in text and "Answer:" in text and "Hits (ranked" in text and "Context the generator" in text
    assert detail.locator("ol.hits li").count() >= 3  # top-k 3 at least, each with its chunk id
    page.locator("#dd-vs").select_option("ab")  # run A right, run B wrong: a filter, never an error
    assert re.match(r"\d+ of \d+ questions", page.locator("#dd-count").inner_text())
    page.locator("#dd-vs").select_option("")  # all questions again: the open one stays open
    detail.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "report_drilldown.png"))
    page.close()


def _dismiss(target) -> None:
    """Clicks a first-visit pop-up's close button if it shows (MLflow's tips and assistant cover the page)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        target.first.click(timeout=5_000)
    except PlaywrightTimeout:  # not shown by this MLflow version, or not this time
        pass


def test_traces_link_opens_the_sweeps_traces_and_one_shows_its_documents_and_a_judges_rationale(
        sweep, ui, browser, shots):
    from mlflow import MlflowClient

    cwd, _ = sweep
    client = MlflowClient(tracking_uri=f"sqlite:///{cwd}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("ragbench")
    [parent] = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("ragbench.role") == "sweep"]
    sweep_id = parent.info.run_id
    url = next(line for line in ui if line.startswith("its traces")).split(": ", 1)[1]
    assert f"tag=ragbench.sweep%3D{sweep_id}" in url and "startTimeLabel=ALL" in url
    traces = client.search_traces(locations=[exp.experiment_id], filter_string=traces_search(sweep_id))
    assert len(traces) == 16  # 2 jobs x 8 questions, each job <= 50 cases: tracking.traces=auto wrote them
    trace = traces[0]
    question = json.loads(trace.info.request_preview)["question"]
    [retrieval] = [s for s in trace.data.spans if s.name == "retrieval"]
    docs = retrieval.outputs
    assert docs and all(d["page_content"] for d in docs)
    f1 = next(a for a in trace.info.assessments if a.name == "answer/f1")
    assert f1.rationale and f1.source.source_id == "ragbench:lexical"  # a rule's definition: the lexical judge

    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    searches: list[str] = []
    page.on("request", lambda r: searches.append(r.post_data or "") if r.url.endswith("/traces/search") else None)
    page.goto(url)
    row = page.get_by_text(json.dumps({"question": question}, ensure_ascii=False)).first
    row.wait_for(timeout=90_000)
    assert any(f"tags.`ragbench.sweep` = '{sweep_id}'" in body for body in searches), searches  # filtered
    chip = page.locator("[data-component-id='web-shared.traces-table.filter.trigger']").first
    assert "(1)" in chip.inner_text()  # one filter shows in the bar (removable there)
    _dismiss(page.get_by_role("button", name="Got it"))
    _dismiss(page.locator("[data-component-id='mlflow.assistant.chat_panel.close']"))
    page.get_by_text("answer/f1", exact=True).first.wait_for(timeout=30_000)  # each score an assessment column
    page.screenshot(path=str(shots / "mlflow_traces_tab.png"))
    row.click()
    page.get_by_text("retrieval", exact=True).first.click(timeout=30_000)  # the RETRIEVER span
    for doc in docs:
        page.get_by_text(doc["page_content"][:60]).first.wait_for(timeout=30_000)
    uri = re.escape(docs[0]["metadata"]["doc_uri"])
    assert re.search(rf'doc_uri\s*:\s*"{uri}"', page.inner_text("body"))  # each document names its source
    page.screenshot(path=str(shots / "mlflow_trace_retrieval.png"))
    page.get_by_text("judge: lexical", exact=True).first.click()
    page.get_by_role("button", name="Assess").first.click()  # the assessments pane
    card = page.get_by_text("f1", exact=True).last.locator("xpath=ancestor::div[3]")  # MLflow names it "f1"
    card.locator("[data-component-id='shared.model-trace-explorer.toggle-assessment-expanded']").click()
    card.get_by_text("Rationale").wait_for(timeout=30_000)
    text = card.inner_text()
    assert "ragbench:lexical" in text and " ".join(f1.rationale.split()) in " ".join(text.split())
    page.screenshot(path=str(shots / "mlflow_trace_judge_rationale.png"))
    page.close()
