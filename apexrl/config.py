"""The whole run configuration: one frozen dataclass tree, YAML presets, ``--set`` overrides, validation.

Every field has a comment with its unit. Validation happens before anything starts (no Ray, no run dir),
and each error names the key, the bad value and what is allowed, so the CLI can print one line and exit 2.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import math
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PRESETS_DIR = Path(__file__).parent / "configs"


class ConfigError(ValueError):
    """A config problem the user can fix; the message is a complete sentence naming key and fix."""


@dataclass(frozen=True)
class EnvConfig:
    id: str = "CartPole-v1"  # any gymnasium id with a discrete action space, e.g. ALE/Pong-v5
    kwargs: Mapping[str, Any] = field(default_factory=dict)  # passed to gymnasium.make
    max_episode_steps: int | None = None  # steps; None keeps the env's own limit
    atari: bool | None = None  # DQN Atari preprocessing; None = on for ALE/ ids
    frame_stack: int = 4  # frames (Atari)
    noop_max: int = 30  # no-op steps at reset (Atari)
    frame_skip: int = 4  # frames per agent step (Atari)
    screen_size: int = 84  # pixels (Atari)
    terminal_on_life_loss: bool = True  # training only (Atari)
    clip_rewards: bool = True  # training only (Atari): sign(r)
    max_episode_frames: int = 108_000  # emulator frames, 30 minutes (Atari)


@dataclass(frozen=True)
class NetworkConfig:
    kind: str = "auto"  # auto | mlp | nature_cnn  (auto: CNN for image observations, else MLP)
    hidden_sizes: tuple[int, ...] = (256, 256)  # units per MLP layer
    dueling: bool = True  # dueling head (Wang et al., 2016)


@dataclass(frozen=True)
class ActorsConfig:
    num_actors: int | None = None  # processes; None = one per CPU core of the host/cluster
    envs_per_actor: int = 4  # environments stepped together by one actor
    eps_base: float = 0.4  # eps_i = eps_base ** (1 + eps_alpha * i / (N - 1))  (Ape-X)
    eps_alpha: float = 7.0
    epsilon_per: str = "env"  # env | actor: which unit gets its own epsilon from the schedule
    send_every: int = 64  # transitions per actor between sends to replay (batched, never 1 by 1)
    weight_sync_period: int = 400  # env steps per actor between weight pulls
    max_inflight_sends: int = 8  # unacknowledged sends before the actor waits for replay
    num_cpus: float = 1.0  # Ray CPUs per actor
    placement: str = "pack"  # pack | spread: Ray scheduling of actors and shards over nodes


@dataclass(frozen=True)
class ReplayConfig:
    capacity: int = 100_000  # transitions over all shards (FIFO eviction)
    alpha: float = 0.6  # priority exponent: P(i) ~ p_i ** alpha
    beta: float = 0.4  # importance-sampling exponent (fixed, as in Ape-X)
    beta_final: float | None = None  # anneal beta linearly to this value...
    beta_anneal_updates: int = 0  # ...over this many learner updates (0 = fixed beta)
    num_shards: int = 1  # ReplayShard Ray actors; capacity is split evenly
    learning_starts: int = 2_000  # transitions before the learner starts; rate-limited actors wait there for it
    priority_eps: float = 1e-6  # added to |TD error|
    samples_per_insert: float | None = None  # learner samples per inserted transition; None = unlimited
    spi_error_buffer: float | None = None  # samples the learner may fall behind that ratio; None = auto
    spi_max_lead: float | None = None  # samples it may run ahead; None = one request (batch x batches_per_request)


@dataclass(frozen=True)
class LearnerConfig:
    lr: float = 1e-3  # optimizer learning rate
    batch_size: int = 128  # transitions per update
    optimizer: str = "adam"  # adam | rmsprop (centered, as in Ape-X)
    optimizer_eps: float = 1e-8  # Adam eps / RMSProp eps
    gamma: float = 0.99  # discount per env step
    n_step: int = 3  # steps in the bootstrapped return
    grad_clip: float = 10.0  # max global gradient norm
    loss: str = "huber"  # huber | mse
    target_update_period: int = 500  # learner updates between target-network copies
    publish_period: int = 10  # learner updates between weight publications to actors
    prefetch: int = 4  # sample requests kept in flight
    batches_per_request: int | None = None  # batches per learner<->shard round trip; None = ~512 transitions (max 8)
    device: str = "cpu"  # cpu | cuda | cuda:N | auto
    max_consecutive_skips: int = 100  # non-finite updates in a row before the run stops (last good ckpt kept)
    num_gpus: float = 0.0  # Ray GPUs for the learner actor
    num_cpus: float = 1.0  # Ray CPUs for the learner actor


@dataclass(frozen=True)
class EvaluationConfig:
    interval_s: float = 10.0  # seconds between greedy evaluations (0 = off)
    episodes: int = 10  # episodes per evaluation
    epsilon: float = 0.0  # exploration during evaluation


@dataclass(frozen=True)
class LoggingConfig:
    report_interval_s: float = 2.0  # seconds between reports (console, metrics.jsonl, TensorBoard)
    tensorboard: bool = True
    console: str = "auto"  # auto | live | plain | off


@dataclass(frozen=True)
class CheckpointConfig:
    every_reports: int = 10  # reports between checkpoints (0 = only at the end)
    keep: int = 3  # newest checkpoints kept on disk
    replay: bool = False  # also save replay contents and priorities


@dataclass(frozen=True)
class StopConfig:
    max_env_steps: int | None = None  # env steps over all actors
    max_time_s: float | None = None  # wall seconds
    target_return: float | None = None  # stop when the evaluation mean reaches this


@dataclass(frozen=True)
class Config:
    seed: int = 0
    name: str | None = None  # run name; None = {env}__s{seed}__{time}
    env: EnvConfig = field(default_factory=EnvConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    actors: ActorsConfig = field(default_factory=ActorsConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    stop: StopConfig = field(default_factory=StopConfig)

    def replace(self, **dotted: Any) -> Config:
        """Return a validated copy with ``{"learner.lr": 1e-4}``-style overrides applied."""
        data = to_dict(self)
        for key, value in dotted.items():
            _set_dotted(data, key, value)
        return from_dict(data)


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

_CHOICES: dict[str, tuple[str, ...]] = {
    "network.kind": ("auto", "mlp", "nature_cnn"),
    "actors.epsilon_per": ("env", "actor"),
    "actors.placement": ("pack", "spread"),
    "learner.optimizer": ("adam", "rmsprop"),
    "learner.loss": ("huber", "mse"),
    "logging.console": ("auto", "live", "plain", "off"),
}


def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain nested dict (tuples as lists, mappings as dicts) for YAML and checkpoints."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if dataclasses.is_dataclass(v):
            v = to_dict(v)
        elif isinstance(v, tuple):
            v = list(v)
        elif isinstance(v, Mapping):
            v = dict(v)
        out[f.name] = v
    return out


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"learner": {"lr": 1e-3}}`` -> ``{"learner.lr": 1e-3}``; lists and env kwargs as JSON text, so
    every value is a scalar (hyperparameter tables, grouping runs by config)."""
    import json

    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and k != "kwargs":
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v, sort_keys=True) if isinstance(v, (Mapping, list)) else v
    return out


def dump_yaml(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
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
        _set_dotted(data, k, v)
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


def _check(cond: bool, key: str, value: Any, allowed: str) -> None:
    if not cond:
        raise ConfigError(f"config key '{key}' = {value!r} is invalid; allowed: {allowed}")


def validate(cfg: Config) -> Config:
    """Range and consistency checks; raise ConfigError naming key, value and what is allowed."""
    for key, choices in _CHOICES.items():
        section, name = key.split(".")
        v = getattr(getattr(cfg, section), name)
        if v not in choices:
            close = difflib.get_close_matches(str(v), choices, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"config key '{key}' = {v!r} is invalid{hint}; allowed: {', '.join(choices)}")
    e, a, r, le = cfg.env, cfg.actors, cfg.replay, cfg.learner
    _check(bool(e.id), "env.id", e.id, "a gymnasium environment id such as CartPole-v1")
    _check(e.max_episode_steps is None or e.max_episode_steps >= 1, "env.max_episode_steps",
           e.max_episode_steps, "an integer >= 1 or null")
    _check(e.frame_stack >= 1, "env.frame_stack", e.frame_stack, "an integer >= 1")
    _check(e.noop_max >= 0, "env.noop_max", e.noop_max, "an integer >= 0")
    _check(e.frame_skip >= 1, "env.frame_skip", e.frame_skip, "an integer >= 1")
    _check(e.screen_size >= 8, "env.screen_size", e.screen_size, "an integer >= 8")
    _check(len(cfg.network.hidden_sizes) >= 1 and all(h >= 1 for h in cfg.network.hidden_sizes),
           "network.hidden_sizes", list(cfg.network.hidden_sizes), "a non-empty list of positive integers")
    _check(a.num_actors is None or a.num_actors >= 1, "actors.num_actors", a.num_actors,
           "an integer >= 1, or null for one per CPU core")
    _check(a.envs_per_actor >= 1, "actors.envs_per_actor", a.envs_per_actor, "an integer >= 1")
    _check(0.0 < a.eps_base <= 1.0, "actors.eps_base", a.eps_base, "a number in (0, 1]")
    _check(a.eps_alpha >= 0.0, "actors.eps_alpha", a.eps_alpha, "a number >= 0")
    _check(a.send_every >= 1, "actors.send_every", a.send_every, "an integer >= 1 (transitions per send)")
    _check(a.weight_sync_period >= 1, "actors.weight_sync_period", a.weight_sync_period, "an integer >= 1")
    _check(a.max_inflight_sends >= 1, "actors.max_inflight_sends", a.max_inflight_sends, "an integer >= 1")
    _check(a.num_cpus >= 0, "actors.num_cpus", a.num_cpus, "a number >= 0")
    _check(r.capacity >= 1, "replay.capacity", r.capacity, "an integer >= 1")
    _check(0.0 <= r.alpha <= 1.0, "replay.alpha", r.alpha, "a number in [0, 1]")
    _check(0.0 <= r.beta <= 1.0, "replay.beta", r.beta, "a number in [0, 1]")
    _check(r.beta_final is None or 0.0 <= r.beta_final <= 1.0, "replay.beta_final", r.beta_final,
           "a number in [0, 1] or null")
    _check(r.beta_anneal_updates >= 0, "replay.beta_anneal_updates", r.beta_anneal_updates, "an integer >= 0")
    _check(r.num_shards >= 1, "replay.num_shards", r.num_shards, "an integer >= 1")
    _check(r.capacity // r.num_shards >= 1, "replay.num_shards", r.num_shards,
           f"at most replay.capacity ({r.capacity}) shards")
    _check(r.learning_starts >= 0, "replay.learning_starts", r.learning_starts, "an integer >= 0")
    _check(r.priority_eps > 0, "replay.priority_eps", r.priority_eps, "a number > 0")
    _check(r.samples_per_insert is None or r.samples_per_insert > 0, "replay.samples_per_insert",
           r.samples_per_insert, "a number > 0 or null")
    _check(r.spi_error_buffer is None or r.spi_error_buffer >= 0, "replay.spi_error_buffer",
           r.spi_error_buffer, "a number of samples >= 0 or null")
    _check(r.spi_max_lead is None or r.spi_max_lead >= 0, "replay.spi_max_lead", r.spi_max_lead,
           "a number of samples >= 0 or null")
    if r.spi_error_buffer is not None and r.spi_max_lead is not None:
        _check((r.spi_error_buffer + r.spi_max_lead) / r.num_shards >= le.batch_size, "replay.spi_max_lead",
               r.spi_max_lead, f"with replay.spi_error_buffer={r.spi_error_buffer}, a lead that makes their sum "
               f"per shard at least learner.batch_size ({le.batch_size}), or the learner and the actors "
               "can wait for each other forever")
    _check(le.lr > 0, "learner.lr", le.lr, "a number > 0, e.g. 1e-3")
    _check(le.batch_size >= 1, "learner.batch_size", le.batch_size, "an integer >= 1")
    _check(r.capacity >= le.batch_size, "replay.capacity", r.capacity,
           f"an integer >= learner.batch_size ({le.batch_size})")
    _check(r.learning_starts <= r.capacity, "replay.learning_starts", r.learning_starts,
           f"at most replay.capacity ({r.capacity})")
    _check(le.optimizer_eps > 0, "learner.optimizer_eps", le.optimizer_eps, "a number > 0")
    _check(0.0 <= le.gamma <= 1.0, "learner.gamma", le.gamma, "a number in [0, 1]")
    _check(le.n_step >= 1, "learner.n_step", le.n_step, "an integer >= 1")
    _check(le.grad_clip > 0, "learner.grad_clip", le.grad_clip, "a number > 0")
    _check(le.target_update_period >= 1, "learner.target_update_period", le.target_update_period,
           "an integer >= 1")
    _check(le.publish_period >= 1, "learner.publish_period", le.publish_period, "an integer >= 1")
    _check(le.prefetch >= 1, "learner.prefetch", le.prefetch, "an integer >= 1")
    _check(le.batches_per_request is None or le.batches_per_request >= 1, "learner.batches_per_request",
           le.batches_per_request, "an integer >= 1 or null")
    _check(le.device == "auto" or le.device == "cpu" or le.device.startswith("cuda") or le.device == "mps",
           "learner.device", le.device, "cpu, cuda, cuda:N, mps or auto")
    _check(le.max_consecutive_skips >= 1, "learner.max_consecutive_skips", le.max_consecutive_skips,
           "an integer >= 1")
    _check(le.num_gpus >= 0, "learner.num_gpus", le.num_gpus, "a number >= 0")
    _check(le.num_cpus >= 0, "learner.num_cpus", le.num_cpus, "a number >= 0")
    ev = cfg.evaluation
    _check(ev.interval_s >= 0, "evaluation.interval_s", ev.interval_s, "a number of seconds >= 0 (0 = off)")
    _check(ev.episodes >= 1, "evaluation.episodes", ev.episodes, "an integer >= 1")
    _check(0.0 <= ev.epsilon <= 1.0, "evaluation.epsilon", ev.epsilon, "a number in [0, 1]")
    _check(cfg.logging.report_interval_s > 0, "logging.report_interval_s", cfg.logging.report_interval_s,
           "a number of seconds > 0")
    _check(cfg.checkpoint.every_reports >= 0, "checkpoint.every_reports", cfg.checkpoint.every_reports,
           "an integer >= 0 (0 = only at the end)")
    _check(cfg.checkpoint.keep >= 1, "checkpoint.keep", cfg.checkpoint.keep, "an integer >= 1")
    s = cfg.stop
    _check(s.max_env_steps is None or s.max_env_steps >= 1, "stop.max_env_steps", s.max_env_steps,
           "an integer >= 1 or null")
    _check(s.max_time_s is None or s.max_time_s > 0, "stop.max_time_s", s.max_time_s, "seconds > 0 or null")
    if cfg.name is not None:
        _check(bool(cfg.name) and "/" not in cfg.name and cfg.name not in (".", ".."), "name", cfg.name,
               "a non-empty name without '/'")
    return cfg


def from_dict(raw: Mapping[str, Any] | None) -> Config:
    """Build and validate a Config from a (possibly partial, possibly RLlib-style) nested dict."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"a config must be a mapping of keys to values, got {type(raw).__name__}")
    return validate(_build(Config, _flatten_aliases(raw), ""))


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
        _set_dotted(data, k, v)
    return from_dict(data)
