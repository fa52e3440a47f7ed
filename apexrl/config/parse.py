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

import apexrl.config.rllib as rllib
from apexrl.config.agent_defaults import with_agent_defaults
from apexrl.config.rllib_keys import KEYS
from apexrl.config.schema import PRESETS_DIR, Config, ConfigError
from apexrl.config.validate import _CHOICES, validate

log = logging.getLogger("apexrl.config")

# RLlib keys that are plain renames (``--set lr=1e-4``); the rest convert through apexrl.config.rllib.
ALIASES: dict[str, str] = {k.rllib: k.sets for k in KEYS if k.rename and "." not in k.rllib}


_SECTIONS = {f.name for f in dataclasses.fields(Config)}


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    head, dot, rest = key.partition(".")
    nested = dot and head in ALIASES and head not in _SECTIONS  # env_config.size -> env.kwargs.size
    key = ALIASES.get(key, f"{ALIASES[head]}.{rest}" if nested else key)
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
    """RLlib's keys (``lr: 1e-4``, ``replay_buffer_config: {...}``) mapped into the tree; an RLlib
    experiment file (named experiments with ``run``) must be read with :func:`load_all`."""
    if rllib.is_experiment_file(raw):
        names = ", ".join(raw)
        raise ConfigError(f"this is an RLlib experiment file ({names}); give it as a file: apexrl train --config FILE")
    return rllib.translate(raw)


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
    raw = _env_object(raw)
    return validate(_build(Config, with_agent_defaults(_migrate(_flatten_aliases(raw))), ""))


def _env_object(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``{"env": MyEnv}`` (a class or creator, RLlib's way) -> the env section with its id and creator."""
    env = raw.get("env")
    if env is None or isinstance(env, (str, Mapping)):
        return raw
    if not callable(env):
        raise ConfigError(f"config key 'env' = {env!r} must be an env id, a class or a creator (a callable taking "
                          "env_config), or an env section")
    section: dict[str, Any] = {"id": describe_env_object(env), "creator": env}
    if "env_config" in raw:
        section["kwargs"] = raw["env_config"]
    return {**{k: v for k, v in raw.items() if k != "env_config"}, "env": section}


def describe_env_object(obj: Any) -> str:
    """What config.yaml records for an env handed over as an object: its import path where it has one
    (a resume rebuilds it), else ``<name>`` (a resume needs it from the caller)."""
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if module and qual and module != "__main__" and "<" not in qual:
        return f"{module}.{qual}"
    return f"<{qual or type(obj).__name__}>"


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


def load_all(path: str | os.PathLike[str] | None = None, overrides: list[str] | tuple[str, ...] = (),
             experiment: str | None = None) -> list[tuple[str | None, Config]]:
    """The CLI's entry: a preset, an apexrl file or an RLlib experiment file (each experiment, or the one
    named), then ``--set`` overrides, then validation. RLlib keys among the overrides are mapped with the
    file's config, so ``--set num_workers=2`` means what it means in RLlib."""
    data = load_yaml(path) if path is not None else {}
    sets = [parse_override(t) for t in overrides]
    if rllib.is_experiment_file(data):
        runs = rllib.experiments(data)
        if experiment is not None:
            runs = [r for r in runs if r[0] == experiment]
            if not runs:
                raise ConfigError(f"no experiment '{experiment}' in '{path}'; it has: {', '.join(data)}")
        theirs = {k: v for k, v in sets if rllib.is_rllib_key(k)}
        if theirs:
            runs = [(n, _merge_rllib(n, data, theirs)) for n, _ in runs]
        return [(name, _apply(raw, sets)) for name, raw in runs]
    if experiment is not None:
        raise ConfigError(f"--experiment {experiment}: '{path}' is not an RLlib experiment file")
    data = dict(data)
    data.update({k: v for k, v in sets if rllib.is_rllib_key(k) and k not in rllib.APEXRL_TOP})
    return [(None, _apply(_flatten_aliases(data), sets))]


def _merge_rllib(name: str, data: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    exp = dict(data[name])
    exp["config"] = {**(exp.get("config") or {}), **theirs}
    return rllib.experiments({name: exp})[0][1]


def _apply(data: dict[str, Any], sets: list[tuple[str, Any]]) -> Config:
    for k, v in sets:
        if not (rllib.is_rllib_key(k) and k not in rllib.APEXRL_TOP):
            set_dotted(data, k, v)
    return from_dict(data)


def load(path: str | os.PathLike[str] | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """:func:`load_all` for a file of one run."""
    runs = load_all(path, overrides)
    if len(runs) > 1:
        raise ConfigError(f"'{path}' holds {len(runs)} experiments ({', '.join(str(n) for n, _ in runs)}); "
                          "pick one with --experiment NAME")
    return runs[0][1]
