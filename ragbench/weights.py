"""Where a sentence-transformers model's weights come from: a pip package that ships them, else the name."""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from pathlib import Path

from ragbench.errors import ModelLoadError

log = logging.getLogger(__name__)


def package_weights(model: str, package: str | None, *, role: str) -> tuple[str, str]:
    """(what to load, revision label) for ``<role>.model`` / ``<role>.package``.

    A ``package`` (pip or import name) that ships the weights through ``get_model_path()`` wins, labelled
    ``<dist>==<version>``; without one, ``model`` (a hub name or a local folder) is loaded as usual,
    labelled ``hub``. A package that is not installed falls back to ``model`` with a warning, so a user
    with internet still gets the model; one without ``get_model_path()`` is a ModelLoadError.
    """
    if not package:
        return model, "hub"
    module_name = package.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        log.warning("%s.package=%s is not installed; loading %s from the Hugging Face hub or a local folder",
                    role, package, model)
        return model, "hub"
    get_path = getattr(module, "get_model_path", None)
    if not callable(get_path):
        raise ModelLoadError(
            f"{role}.package '{package}' has no get_model_path(); "
            f"fix: name a package that ships weights with get_model_path(), or set {role}.package=null"
        )
    dist = module_name.replace("_", "-")
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return str(Path(get_path())), f"{dist}=={version}"
