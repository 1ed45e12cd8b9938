"""Retrieval scope names (``document`` | ``corpus``), the one a dataset adapter declares, and the
``${default_scope:}`` resolver's function. A leaf (it imports only ``ragbench.errors``), so
``ragbench/__init__`` registers the resolver without loading a subpackage; ``ragbench.retrieval.scope``
holds the document-scoped search itself."""

from __future__ import annotations

import importlib

from ragbench.errors import ConfigError

SCOPES = ("document", "corpus")


def default_scope(target: str | None) -> str:
    """retrieval.scope's default (``${default_scope:${oc.select:dataset._target_,null}}`` in
    conf/retrieval/*.yaml): the ``default_scope`` the adapter class ``target`` declares (its official
    protocol, ``datasets.base.BaseAdapter``); ``corpus`` when no dataset is configured."""
    if not target:
        return "corpus"
    module, _, name = str(target).rpartition(".")
    try:
        adapter = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"dataset._target_={target!r} cannot be imported ({exc}); fix: name an importable "
                          "adapter class (module.Class)") from None
    return check_scope(declared_scope(adapter, str(target)))


def declared_scope(adapter: object, name: str) -> str:
    """The ``default_scope`` an adapter (class or instance) declares; a ConfigError naming the fix without one."""
    scope = getattr(adapter, "default_scope", None)
    if not isinstance(scope, str):
        raise ConfigError(f"dataset adapter {name} declares no default_scope; fix: subclass "
                          "ragbench.datasets.base.BaseAdapter or set default_scope = 'corpus' | 'document' on it")
    return scope


def check_scope(scope: str) -> str:
    """``scope`` if valid, else a one-line ConfigError naming the choices."""
    if scope not in SCOPES:
        raise ConfigError(f"retrieval.scope={scope!r} is not valid; choose one of {list(SCOPES)}")
    return scope
