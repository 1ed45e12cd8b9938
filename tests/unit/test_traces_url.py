"""``ragbench ui``'s link to a sweep's traces: MLflow's Traces tab with its tag filter in the URL (the page's
``tag`` parameter; the browser test opens it in MLflow's UI)."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote

from ragbench import ui
from ragbench.tracking.traces import JobFacts, case_trace


def _ui_tag_filters(url: str) -> list[tuple[str, str]]:
    """The tag filters MLflow 3's Traces tab (3.17) reads from a URL: each ``tag`` parameter ``key=value``,
    split at the first ``=`` and each side URL-decoded again."""
    query = parse_qs(url.split("#", 1)[1].split("?", 1)[1])
    return [(unquote(v.split("=", 1)[0]), unquote(v.split("=", 1)[1])) for v in query.get("tag", [])]


def test_the_traces_link_is_the_traces_tab_over_all_time_filtered_to_the_sweeps_tag():
    url = ui.traces_url("http://127.0.0.1:5000", "7", "0123abcd")
    path, query = url.split("?", 1)
    assert path == "http://127.0.0.1:5000/#/experiments/7/traces"
    assert parse_qs(query)["startTimeLabel"] == ["ALL"]  # not the last 7 days: an older sweep too
    assert _ui_tag_filters(url) == [("ragbench.sweep", "0123abcd")]
    assert ui.traces_search("0123abcd") == "tags.`ragbench.sweep` = '0123abcd'"  # what the page then asks


def test_a_value_with_reserved_characters_survives_both_decodings():
    url = ui.traces_url("http://h:1", "7", "a=b&c d")
    assert _ui_tag_filters(url) == [("ragbench.sweep", "a=b&c d")]


def test_without_a_sweep_the_link_is_the_whole_traces_tab():
    url = ui.traces_url("http://h:1", "3")
    assert url == "http://h:1/#/experiments/3/traces?startTimeLabel=ALL" and _ui_tag_filters(url) == []


def test_the_filter_names_the_tag_the_traces_carry():
    job = JobFacts(experiment_id="1", run_id="r1", job="topk=3 #0", sweep="p9", dataset="qasper")
    trace = case_trace({"qid": "q1", "question": "Why?", "answer": "Because.", "status": "ok"}, job=job, start_ms=0)
    assert trace.info.tags[ui.SWEEP_TAG] == "p9"


def test_ui_prints_the_filtered_traces_link_beside_the_sweep(capsys):
    ui._print_urls("http://h:1", exp_id="2", experiment="ragbench", sweep="p9", chosen=False, views=set(),
                   browse=False)
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("its traces"))
    assert line.endswith(ui.traces_url("http://h:1", "2", "p9")) and "&tag=ragbench.sweep%3Dp9" in line


def test_without_a_sweep_ui_prints_the_whole_traces_tab(capsys):
    ui._print_urls("http://h:1", exp_id="2", experiment="ragbench", sweep=None, chosen=False, views=set(),
                   browse=False)
    assert "traces (one per question of each job): http://h:1/#/experiments/2/traces?startTimeLabel=ALL\n" in (
        capsys.readouterr().out)
