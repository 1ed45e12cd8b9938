"""Config checks that run before any model or MLflow store is touched: known keys, numeric ranges and
that ``dataset.path`` exists.

Two moments:
- ``check_overrides(argv)``, before Hydra composes: a command-line key that no config file has
  (``retrieval.topkk=3``) gets one line naming the closest valid keys, instead of Hydra's advice to
  append it with ``+`` (where it would be silently ignored);
- ``check_config(cfg)``, after composition: keys added with ``+`` to a group's own settings are
  refused the same way, and every numeric value is checked against its rule in ``NUMBERS`` (finite,
  in range: ``topk=nan``, ``llm.timeout=inf``, ``temperature=nan`` fail here, with the valid range).

The schema of the keys is the packaged config files themselves (``ragbench/conf``): the keys a group
accepts are the union of its options' keys. Inside a component (a node with ``_target_``) a typo
already fails when the component is built, because components take explicit keyword parameters.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple, cast

from omegaconf import DictConfig, ListConfig, OmegaConf

from ragbench.datasets.reader import download_hint
from ragbench.datasets.sources import SOURCES
from ragbench.embed.shard import KEY, parse_shard
from ragbench.errors import ConfigError, DatasetError
from ragbench.validate import number

CONF = Path(__file__).resolve().parent / "conf"
COMPONENT_GROUPS = ("dataset", "chunker", "embedder", "retrieval", "query", "reranker", "expander", "llm", "judge")


class Rule(NamedTuple):
    lo: float | None = None
    hi: float | None = None
    integer: bool = False
    lo_open: bool = False
    optional: bool = False


_INT1 = Rule(lo=1, integer=True)
_INT1_OR_NULL = Rule(lo=1, integer=True, optional=True)
_POSITIVE = Rule(lo=0, lo_open=True)
# leaf key (or full dotted key, which wins) -> rule; applied wherever the key sits in a component group
NUMBERS: dict[str, Rule] = {
    "topk": _INT1, "search_depth": _INT1, "retrieval.retriever.candidates": _INT1, "candidates": Rule(lo=0, integer=True),
    "k1": Rule(lo=0), "b": Rule(lo=0, hi=1), "k_rrf": _POSITIVE, "weights": Rule(lo=0),
    "hnsw_m": Rule(lo=2, integer=True), "ef_construction": _INT1, "ef_search": _INT1,
    "nlist": _INT1, "nprobe": _INT1, "train_size": _INT1,
    "batch_size": _INT1, "dimensions": _INT1_OR_NULL, "max_seq_length": _INT1_OR_NULL, "max_length": _INT1,
    "max_paragraph_chars": _INT1, "max_sentence_chars": _INT1, "min_sentence_chars": Rule(lo=0, integer=True),
    "parent_depth": Rule(lo=0, hi=3, integer=True), "child_depth": Rule(lo=0, integer=True),
    "max_context_tokens": _INT1_OR_NULL, "lambda_": Rule(lo=0, hi=1), "max_per_parent": _INT1,
    "temperature": Rule(lo=0, hi=2), "max_tokens": _INT1, "timeout": _POSITIVE,
    "num_retries": Rule(lo=0, hi=100, integer=True), "backoff_s": Rule(lo=0, hi=3600),
    "max_concurrency": _INT1_OR_NULL, "repeats": _INT1, "pass_threshold": Rule(lo=0, hi=4), "min_overlap": Rule(lo=0, hi=1),
    "query.transform.n": _INT1, "num_docs": _INT1_OR_NULL, "sample_size": _INT1_OR_NULL, "max_queries": _INT1_OR_NULL,
    "seed": Rule(lo=0, integer=True), "max_record_chars": _INT1, "batch_max_wait_s": _POSITIVE,
}


# keys that were removed, and what replaced them: one line naming the new key, wherever the old one is given
RETIRED = {"use_cache": "the LLM reply cache follows cache.mode (read_write | refresh | read_only | off)",
           "cache_dir": "LLM replies are kept in the one cache store under cache.dir"}


def _retired(key: str) -> None:
    leaf = key.rsplit(".", 1)[-1]
    if leaf in RETIRED:
        raise ConfigError(f"{key} was removed: {RETIRED[leaf]}; fix: drop {key} and set cache.mode or cache.dir")


def _close(word: str, options: list[str], prefix: str = "") -> str:
    """``did you mean retrieval.topk?``, or the valid keys when none is close."""
    options = [o for o in options if o != "_target_"]
    near = difflib.get_close_matches(word, options, n=3, cutoff=0.6) or difflib.get_close_matches(
        word, options, n=1, cutoff=0.5)  # short keys: k2 -> k1
    if near:
        return f"did you mean {' or '.join(prefix + n for n in near)}?"
    return f"valid keys here: {', '.join(sorted(options))}"


@functools.lru_cache(maxsize=64)
def _option(group: str, name: str) -> DictConfig | None:
    """A group option's keys, with those of the options of the same group it extends (its ``defaults``,
    e.g. ``llm/anthropic`` extends ``llm/openai``)."""
    path = CONF / group / f"{name}.yaml"
    if not path.is_file():
        return None
    node = OmegaConf.load(path)
    assert isinstance(node, DictConfig)
    bases = [b for b in node.get("defaults") or [] if isinstance(b, str) and b != "_self_"]
    if not bases:
        return node
    own = OmegaConf.masked_copy(node, [str(k) for k in node if k != "defaults"])
    parents = [_shared(b) if b.startswith("/") else _option(group, b) for b in bases]
    merged = OmegaConf.merge(*(p for p in parents if p is not None), own)
    assert isinstance(merged, DictConfig)
    return merged


def _shared(entry: str) -> DictConfig | None:
    """A shared node an option merges in (``/_endpoint/llm@_here_``, ``/_endpoint/llm@transform.client``),
    placed at its package."""
    path, _, package = entry[1:].partition("@")
    folder, _, name = path.rpartition("/")
    node = _option(folder, name)
    if node is None or package in ("", "_here_"):
        return node
    for part in reversed(package.split(".")):
        node = OmegaConf.create({part: node})
    return node


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def _group_keys(group: str, chosen: list[str] | None = None) -> set[str] | None:
    """Top-level keys of a group's options (all of them, or the chosen ones); None if one is not ours."""
    keys: set[str] = set()
    for name in chosen or _options(group):
        node = _option(group, name)
        if node is None:
            return None  # an option from the user's own search path: Hydra decides
        keys.update(str(k) for k in node if k != "defaults")
    return keys


def _root() -> DictConfig:
    return OmegaConf.load(CONF / "config.yaml")  # type: ignore[return-value]


def _groups() -> list[str]:
    return sorted(p.name for p in CONF.iterdir() if p.is_dir() and not p.name.startswith("_"))


def _root_keys() -> list[str]:
    return sorted({*(str(k) for k in _root() if k != "defaults"), *_groups(), "hydra"})


# ---- after composition ----------------------------------------------------------------------------

def _numbers(prefix: str, node: Any) -> Iterator[tuple[str, str, Any]]:
    """(dotted key, leaf, value) of every leaf below ``node``; list items get their index."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            yield from _numbers(f"{prefix}.{k}", v)
    elif isinstance(node, list) and node and all(isinstance(v, Mapping) for v in node):
        for i, v in enumerate(node):
            yield from _numbers(f"{prefix}.{i}", v)
    else:
        yield prefix, prefix.rsplit(".", 1)[-1], node


_REFERENCE = re.compile(r"\$\{(?:oc\.select:)?([\w.]+)(?:,[^{}]*)?\}")


def _origin(raw: Any, key: str) -> str:
    """The key a value was set under: ``retrieval.retriever.source.timeout`` is ``${system.source}``'s
    ``timeout``, which is ``${system.timeout}``: the user's key is ``system.timeout``. Followed through
    whole-value interpolations (``${a.b}``, ``${oc.select:a.b,default}``) of the unresolved config."""
    for _ in range(16):  # a chain of interpolations, never a loop
        parts, node, moved = key.split("."), raw, False
        for i, part in enumerate(parts):
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return key
            ref = _REFERENCE.fullmatch(node) if isinstance(node, str) else None
            if ref is not None:
                key, moved = ".".join([ref.group(1), *parts[i + 1:]]), True
                break
        if not moved:
            return key
    return key


def check_dataset_path(name: str, path: Any) -> None:
    """A ``dataset.path`` that does not exist, as the adapter names it (``BaseAdapter.root``), before any
    store is opened or run created: a run whose data cannot be read is not worth a FAILED record."""
    if not isinstance(path, str) or not path or "${" in path:
        return  # null (the bundled sample), or an interpolation Hydra resolves later
    root = Path(path).expanduser()
    if root.exists():
        return
    raise DatasetError("dataset.path does not exist", dataset=name, file=str(root),
                       fix=(f"set dataset.path to the folder holding the official {name} files" + download_hint(name))
                       if name in SOURCES else
                       "create that folder with your documents and QA file, or correct dataset.path")


def check_config(cfg: DictConfig) -> None:
    """Unknown group keys, out-of-range numbers and a missing ``dataset.path`` as one-line errors
    (nothing heavy imported)."""
    for group in COMPONENT_GROUPS:
        node = cfg.get(group)
        if not isinstance(node, DictConfig) or "_target_" in node:
            continue
        known = _group_keys(group)
        unknown = sorted({str(k) for k in node.keys()} - known) if known is not None else []
        if unknown and known is not None:
            key = unknown[0]
            _moved(f"{group}.{key}")
            raise ConfigError(f"{group}.{key} is not a setting of the {group} group; "
                              f"{_close(key, sorted(known), f'{group}.')}")
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(resolved, dict)
    raw = OmegaConf.to_container(cfg, resolve=False)
    for group in COMPONENT_GROUPS:
        for key, leaf, value in _numbers(group, resolved.get(group) or {}):
            _retired(key)
            rule = NUMBERS.get(key) or NUMBERS.get(leaf)
            if rule is None:
                continue
            named = _origin(raw, key)  # the user's key: system.timeout, not retrieval.retriever.source.timeout
            for i, item in enumerate(value) if isinstance(value, list) else [(None, value)]:
                number(named if i is None else f"{named}[{i}]", item, **rule._asdict())
    dataset = resolved.get("dataset")
    if isinstance(dataset, dict):
        check_dataset_path(str(dataset.get("name") or "dataset"), dataset.get("path"))
    check_shard(cast(dict[str, Any], resolved))


def check_shard(resolved: Mapping[str, Any]) -> None:
    """``embedder.shard`` and ``stages=encode`` go together (``ragbench.embed.shard``): one line each otherwise."""
    embedder, retrieval = resolved.get("embedder"), resolved.get("retrieval")
    shard = parse_shard(embedder.get("shard") if isinstance(embedder, Mapping) else None)
    encode = str(resolved.get("stages") or "all") == "encode"
    if shard is not None and not encode:
        raise ConfigError(f"{KEY}={shard.label} encodes one slice of the corpus vectors and searches nothing; "
                          f"fix: add stages=encode (then search in a job without {KEY})")
    if encode and (not isinstance(embedder, Mapping) or not embedder):
        raise ConfigError("stages=encode needs an embedder; fix: set embedder=minilm (or another)")
    if encode and shard is None:
        raise ConfigError(f"stages=encode encodes the corpus vectors of {KEY}=i/n and stops; fix: add {KEY}=0/1 "
                          f"(the whole corpus), or {KEY}=0/4,1/4,2/4,3/4 in a -m sweep (one job per shard)")
    cache = resolved.get("cache")
    mode = cache.get("mode") if isinstance(cache, Mapping) else None
    if encode and mode in ("off", "read_only"):
        raise ConfigError(f"stages=encode stores its shard in the stage cache, which cache.mode={mode} does not write; "
                          "fix: cache.mode=read_write (or refresh), with a cache.dir every node shares")
    if encode and isinstance(retrieval, Mapping) and retrieval.get("parent_vectors") == "mean":
        raise ConfigError(f"{KEY} cannot split retrieval.parent_vectors=mean: a parent's vector pools its children's "
                          "in one pass; fix: use retrieval.parent_vectors=none or direct, or drop stages=encode")


# ---- before composition ---------------------------------------------------------------------------

def _walk(path: list[str], node: Any, done: list[str], chosen: str = "") -> None:
    """Follows ``path`` into ``node``; a ConfigError at the first step that does not exist."""
    for i, part in enumerate(path):
        here = ".".join([*done, *path[:i]])
        if isinstance(node, DictConfig):
            if part not in node:
                keys = [str(k) for k in node if k != "defaults"]
                raise ConfigError(f"{here}.{part} is not a config key{chosen}; {_close(part, keys, here + '.')} "
                                  f"(all keys: python -m ragbench --cfg job)")
            node = node[part]
        elif isinstance(node, ListConfig):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"{here}.{part}: {here} is a list of {len(node)}; use an index 0..{len(node) - 1}")
            node = node[int(part)]
        else:
            raise ConfigError(f"{here} is a single value, it has no key '{part}'; override it as {here}=...")


# keys that moved to another group: their old spelling names the new one
MOVED = {"embedder.parent_vectors": "retrieval.parent_vectors"}
# keys whose feature was removed: why, and nothing replaces them
REMOVED = {"embedder.worker": "the encoder worker (it cost CPU and saved none)",
           "tracking.background_artifacts": "the forked case-file writer (the job's record is written as it goes)"}


def _moved(key: str) -> None:
    if key in MOVED:
        raise ConfigError(f"{key} has moved: use {MOVED[key]} (the chunk tree searched is a retrieval setting)")
    if key in REMOVED:
        raise ConfigError(f"{key} was removed with {REMOVED[key]}; fix: drop {key}")


def check_overrides(args: list[str]) -> None:
    """Plain ``key=value`` overrides whose key exists in no config file, before Hydra composes."""
    try:
        from hydra._internal.utils import get_args_parser  # Hydra's own command line, as @hydra.main reads it
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(get_args_parser().parse_known_args(args)[0].overrides)
    except Exception:  # noqa: BLE001 - malformed overrides get Hydra's own message
        return
    _check_choices(parsed, args)
    chosen: dict[str, list[str]] = {}
    for o in parsed:
        if o.is_add() or o.is_force_add() or o.is_delete():
            continue
        if "." not in o.key_or_group and o.key_or_group in _groups():
            value = o.value()
            chosen[o.key_or_group] = [str(v) for v in value] if isinstance(value, list) else [str(value)]
    root = _root()
    defaults = {str(k): str(v) for d in root.get("defaults", []) if isinstance(d, DictConfig) for k, v in d.items()}
    for o in parsed:
        key = o.key_or_group
        if not o.is_delete():
            _moved(key)
        if o.is_add() or o.is_force_add() or o.is_delete() or key.startswith("hydra") or o.package:
            continue
        _retired(key)
        first, *rest = key.split(".")
        if first not in _root_keys():
            raise ConfigError(f"{key} is not a config key or group; {_close(first, _root_keys())}")
        if not rest or first == "experiment":
            continue
        if first in _groups():
            names = chosen.get(first) or ([defaults[first]] if defaults.get(first) not in (None, "null") else [])
            if key == "dataset.path":
                for value in o.sweep_iterator() if o.is_sweep_override() else [o.value()]:
                    check_dataset_path(names[0] if names else "dataset", value)
            nodes = [_option(first, n) for n in names]
            if not nodes or any(n is None for n in nodes) or "experiment" in chosen:
                continue  # an option of the user's, or an experiment that may add keys: Hydra decides
            merged = OmegaConf.merge(*nodes) if len(nodes) > 1 else nodes[0]
            _walk(rest, merged, [first], f" of {first}={','.join(names)}")
        else:
            _walk(rest, root[first], [first])


# command-line options that add config folders of the user's: a group option may then be theirs (Hydra decides)
SEARCH_PATH_ARGS = ("hydra.searchpath", "+hydra.searchpath", "++hydra.searchpath", "--config-dir", "-cd",
                    "--config-path", "-cp")


def _check_choices(parsed: list[Any], args: list[str]) -> None:
    """Every value given to a config group (``dataset=locomo,qasprr``, ``'judge=[lexical,llmm]'``) names one
    of its options: each value of a sweep is checked here, before Hydra composes and before any MLflow store
    is opened, so a typo in the third value of a list is one line, not Hydra's 14 and a FAILED sweep run."""
    if any(a.split("=", 1)[0] in SEARCH_PATH_ARGS for a in args):
        return
    groups = _groups()
    for o in parsed:
        group = o.key_or_group
        if o.is_delete() or o.package or group not in groups or not _options(group):
            continue
        if o.is_sweep_override() and (o.value_type is None or o.value_type.name == "GLOB_CHOICE_SWEEP"
                                      or not o.is_discrete_sweep()):
            continue  # glob(...) picks among the options itself
        values = list(o.sweep_iterator()) if o.is_sweep_override() else [o.value()]
        names = [v for value in values for v in (value if isinstance(value, list) else [value])]
        options = _options(group)
        for name in names:
            if name is None or str(name) in options:
                continue
            given = o.input_line or f"{group}={name}"
            raise ConfigError(f"{name!s} is not an option of {group} (in {given}); "
                              f"{_close(str(name), options, f'{group}=')}".replace("valid keys here", "options"))


OPEN_KEYS = ("system.params.",)  # keys a user names freely (an outside system's own parameters)


def open_overrides(args: list[str]) -> list[str]:
    """``system.params.top_k=3,5`` as ``++system.params.top_k=3,5``: an outside system's parameters are its
    own, so no config file can list them; Hydra's force-add sets a new key or overrides one already set
    (``+`` and ``++`` forms, and every other argument, pass through unchanged)."""
    return [f"++{a}" if a.startswith(OPEN_KEYS) and "=" in a else a for a in args]
