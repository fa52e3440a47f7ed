"""Reading a config: YAML presets and files, ``--set`` overrides, RLlib-style aliases, deprecated keys,
typed coercion with one-line errors. ``apexrl.config`` re-exports the entry points."""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import logging
import math
import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from apexrl.config import PRESETS_DIR, Config, ConfigError
from apexrl.config_validate import _CHOICES, validate

log = logging.getLogger("apexrl.config")

# RLlib-style keys of the seed article's config dict, mapped to ours.
ALIASES: dict[str, str] = {
    "num_workers": "actors.num_actors",
    "num_env_runners": "actors.num_actors",
    "num_envs_per_worker": "actors.envs_per_actor",
    "num_envs_per_env_runner": "actors.envs_per_actor",
    "lr": "learner.lr",
    "train_batch_size": "learner.batch_size",
    "rollout_fragment_length": "actors.send_every",
    "num_gpus": "learner.num_gpus",
    "env": "env.id",
    "gamma": "learner.gamma",
    "n_step": "learner.n_step",
    "buffer_size": "replay.capacity",
    "target_network_update_freq": "learner.target_update_period",
    "num_steps_sampled_before_learning_starts": "replay.learning_starts",
    "learning_starts": "replay.learning_starts",
    "seed": "seed",
}
# RLlib keys that carry no meaning here but appear in copied configs; accepted when harmless.
_IGNORED = {"framework": {"torch"}}


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    key = ALIASES.get(key, key)
    parts = key.split(".")
    node = data
    for i, p in enumerate(parts[:-1]):
        child = node.get(p)
        if not isinstance(child, dict):
            if p in node:
                raise ConfigError(f"config key '{'.'.join(parts[: i + 1])}' is a value, not a section")
            child = node.setdefault(p, {})
        node = child
    node[parts[-1]] = value


def _flatten_aliases(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Move top-level RLlib-style keys (``lr: 1e-4``) to their place in the tree."""
    data: dict[str, Any] = {}
    sections = {f.name for f in dataclasses.fields(Config) if dataclasses.is_dataclass(f.default_factory)}  # type: ignore[arg-type]
    aliased: list[tuple[str, Any]] = []
    for k, v in raw.items():
        if k in _IGNORED:
            if v not in _IGNORED[k]:
                raise ConfigError(f"config key '{k}' = {v!r} is not supported; allowed: {sorted(_IGNORED[k])}")
            continue
        if k == "env" and isinstance(v, str):
            aliased.append((k, v))
        elif k in sections or k not in ALIASES:
            data[k] = v
        else:
            aliased.append((k, v))
    for k, v in aliased:
        set_dotted(data, k, v)
    return data


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def _coerce(key: str, value: Any, tp: Any) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(key, value, a)
            except ConfigError as e:
                errors.append(e)
        allowed = " or ".join("null" if a is type(None) else _type_name(a) for a in args)
        raise ConfigError(f"config key '{key}' = {value!r} has the wrong type; expected {allowed}")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"config key '{key}' = {value!r} must be true or false")
    if tp in (int, float) and isinstance(value, str) and _looks_numeric(value):
        value = float(value)  # PyYAML reads 1e-4 (no dot) as a string
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not value.is_integer()
        ):
            raise ConfigError(f"config key '{key}' = {value!r} must be an integer")
        return int(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"config key '{key}' = {value!r} must be a number")
        if not math.isfinite(float(value)):
            raise ConfigError(f"config key '{key}' = {value!r} must be a finite number")
        return float(value)
    if tp is str:
        word = "on" if value is True else "off" if value is False else None
        if word is not None and word in _CHOICES.get(key, ()):
            return word  # YAML 1.1 reads a bare off/on/no/yes as a boolean
        if not isinstance(value, str):
            raise ConfigError(f"config key '{key}' = {value!r} must be a string")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key '{key}' = {value!r} must be a list, e.g. [256, 256]")
        return tuple(_coerce(f"{key}[{i}]", v, args[0]) for i, v in enumerate(value))
    if origin in (Mapping, dict, collections.abc.Mapping) or tp is Mapping:
        if not isinstance(value, Mapping):
            raise ConfigError(f"config key '{key}' = {value!r} must be a mapping")
        return dict(value)
    if tp is Any:
        return value
    raise ConfigError(f"config key '{key}': unsupported type {tp}")  # pragma: no cover


def _build(cls: type, data: Mapping[str, Any], prefix: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"config section '{prefix.rstrip('.') or 'root'}' must be a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs: dict[str, Any] = {}
    for k, v in data.items():
        if k not in names:
            candidates = names + ([a for a in ALIASES] if not prefix else [])
            close = difflib.get_close_matches(str(k), candidates, n=1, cutoff=0.6)
            hint = f"; did you mean '{prefix}{close[0]}'?" if close else f"; allowed: {', '.join(names)}"
            raise ConfigError(f"unknown config key '{prefix}{k}'{hint}")
        tp = hints[k]
        if dataclasses.is_dataclass(tp):
            kwargs[k] = _build(tp, v if v is not None else {}, f"{prefix}{k}.")
        else:
            kwargs[k] = _coerce(f"{prefix}{k}", v, tp)
    return cls(**kwargs)


def _migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Old keys that still work: ``network.hidden_sizes: [a, b, h]`` is ``torso: [a, b]``, ``head: h``."""
    net = data.get("network")
    if isinstance(net, Mapping) and "hidden_sizes" in net:
        net = dict(net)
        hs = net.pop("hidden_sizes")
        if not isinstance(hs, (list, tuple)) or not hs:
            raise ConfigError(f"config key 'network.hidden_sizes' = {hs!r} must be a non-empty list "
                              "(deprecated: use network.torso and network.head)")
        if "torso" in net or "head" in net:
            raise ConfigError("config keys 'network.hidden_sizes' and 'network.torso'/'network.head' both set; "
                              "keep only torso and head")
        net["torso"], net["head"] = list(hs[:-1]), hs[-1]
        log.warning("config key 'network.hidden_sizes' is deprecated: use network.torso=%s and network.head=%s",
                    list(hs[:-1]), hs[-1])
        data = {**data, "network": net}
    return data


def from_dict(raw: Mapping[str, Any] | None) -> Config:
    """Build and validate a Config from a (possibly partial, possibly RLlib-style) nested dict."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"a config must be a mapping of keys to values, got {type(raw).__name__}")
    return validate(_build(Config, _migrate(_flatten_aliases(raw)), ""))


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """A config file path, or the name of a shipped preset (``atari`` -> configs/atari.yaml)."""
    p = Path(path)
    if p.exists():
        return p
    preset = PRESETS_DIR / (p.name if p.suffix else f"{p.name}.yaml")
    if preset.exists():
        return preset
    names = sorted(x.stem for x in PRESETS_DIR.glob("*.yaml"))
    raise ConfigError(f"config file '{path}' not found; give a path or one of the presets: {', '.join(names)}")


def load_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = resolve_path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file '{p}': {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        where = ""
        mark = getattr(e, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(e, "problem", None) or "invalid YAML"
        raise ConfigError(f"config file '{p}' is not valid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file '{p}' must hold a mapping of keys to values")
    return data


def parse_override(text: str) -> tuple[str, Any]:
    """``learner.lr=3e-4`` -> ("learner.lr", 0.0003); values are parsed as YAML scalars/lists."""
    if "=" not in text:
        raise ConfigError(f"--set '{text}' must look like key=value, e.g. --set learner.lr=3e-4")
    key, _, raw = text.partition("=")
    key = key.strip()
    if not key:
        raise ConfigError(f"--set '{text}' has no key; use key=value, e.g. --set learner.lr=3e-4")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return key, value


def _looks_numeric(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def load(path: str | os.PathLike[str] | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """The CLI's entry: preset or file, then ``--set`` overrides, then validation."""
    data = load_yaml(path) if path is not None else {}
    data = _flatten_aliases(data)
    for text in overrides:
        k, v = parse_override(text)
        set_dotted(data, k, v)
    return from_dict(data)
