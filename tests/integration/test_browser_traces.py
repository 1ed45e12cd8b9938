"""One trace of a real small sweep in MLflow's Traces tab, in headless Chromium: the retrieved documents
of its RETRIEVER span and a rule's rationale on an assessment (``ragbench.tracking.traces``). Reuses the
sweep, the ``ragbench ui`` server and the browser of ``test_browser``."""

from __future__ import annotations

import pytest

from tests.integration.test_browser import browser, shots, sweep, ui  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow


def test_a_trace_shows_its_retrieved_documents_and_a_rationale(sweep, ui, browser, shots):  # noqa: F811
    from mlflow import MlflowClient

    cwd, _ = sweep
    url = next(line for line in ui if line.startswith("its traces")).split(": ", 1)[1]
    client = MlflowClient(tracking_uri=f"sqlite:///{cwd}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("ragbench")
    found = client.search_traces(locations=[exp.experiment_id], max_results=5)
    assert found, "the sweep wrote no traces"
    trace = client.get_trace(found[0].info.trace_id)
    [retrieval] = [s for s in trace.data.spans if s.span_type == "RETRIEVER"]
    doc = retrieval.outputs[0]
    f1 = next(a for a in trace.info.assessments if a.name == "answer/f1")
    assert f1.rationale and f1.source.source_type == "CODE"
    page = browser.new_page(viewport={"width": 1600, "height": 900})
    page.goto(f"{url}?selectedEvaluationId={trace.info.trace_id}")
    page.get_by_text("retrieval").first.wait_for(timeout=90_000)
    page.locator("[data-component-id=\"mlflow.evaluations_review.modal\"]").get_by_text("retrieval", exact=True).first.click(force=True)
    page.get_by_text(doc["page_content"][:40]).first.wait_for(timeout=60_000)
    page.screenshot(path=str(shots / "mlflow_trace_retrieval.png"))
    assert f1.rationale[:30] in page.inner_text("body") or page.get_by_text("answer/f1").count() > 0
    page.close()
