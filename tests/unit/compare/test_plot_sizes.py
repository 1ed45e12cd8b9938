"""Every report PNG is at most 1,600 px wide with text of at least 10 px, one panel per dataset, and no
panel for a metric whose value is the same in every run."""

from __future__ import annotations

import matplotlib.text
import pytest

from ragbench.compare import plots
from ragbench.compare.analysis import analyse
from ragbench.compare.runcases import from_rows


def _runs():
    def rows(shift: float, ds: str) -> list[dict]:
        return [{"qid": f"{ds}{i}", "question_type": ["temporal", "single-hop", "multi-hop", "open"][i % 4],
                 "status": "ok", "answer/f1": min(1.0, (i % 7) / 7 + shift), "retrieval/hit_at_5": 1.0,
                 "retrieval/mrr": (i % 3) / 3 + shift / 2, "context/tokens": 100.0 + i + 50 * shift,
                 "latency/generate_ms": 5.0 + i % 4} for i in range(40)]
    return [from_rows(rows(s, ds), run_id=f"{ds}{j}", name=f"topk={j} dataset={ds} #{j}", dataset=ds, topk=5)
            for ds in ("locomo", "qasper") for j, s in enumerate((0.0, 0.2, -0.1, 0.05, 0.1, 0.15))]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    comp, taxa = analyse(_runs(), resamples=200)
    figures: dict[str, list[tuple[float, float, list[float], list[str]]]] = {}  # name -> (width, dpi, fonts, titles)
    real_save = plots._save

    def save(fig, path):
        texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]
        titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
        figures[path.name] = [(fig.get_figwidth(), fig.get_dpi(), [t.get_fontsize() for t in texts], titles)]
        return real_save(fig, path)

    out = tmp_path_factory.mktemp("plots")
    plots._save = save
    try:
        files = [f for f in (plots.metric_ci(out / "metrics_ci.png", comp, {}), plots.pareto(out / "pareto.png", comp, {}),
                             plots.heatmap(out / "by_type_heatmap.png", comp, {}),
                             plots.taxonomy_bars(out / "taxonomy.png", taxa, {})) if f is not None]
    finally:
        plots._save = real_save
    return files, figures


def test_every_png_fits_1600_px_with_text_at_least_10_px(drawn):
    from PIL import Image

    files, figures = drawn
    assert {f.name for f in files} == {"metrics_ci.png", "pareto.png", "by_type_heatmap.png", "taxonomy.png"}
    for f in files:
        with Image.open(f) as im:
            assert im.width <= 1600, (f.name, im.width)
        [(_, dpi, sizes, _)] = figures[f.name]
        assert min(sizes) * dpi / 72 >= 10, (f.name, min(sizes))


def test_one_panel_per_dataset_and_none_for_a_flat_metric(drawn):
    _, figures = drawn
    [(_, _, _, titles)] = figures["metrics_ci.png"]
    assert any(t.startswith("locomo: answer/f1") for t in titles) and any(t.startswith("qasper: answer/f1") for t in titles)
    assert not any("hit_at_5" in t for t in titles)  # 1.0 in every run: no panel
    [(_, _, _, heat)] = figures["by_type_heatmap.png"]
    assert not any("hit_at_5" in t for t in heat) and {t.split(":")[0] for t in heat if t} == {"locomo", "qasper"}
