"""RLlib's Ape-X configs and tuned-example files, read as apexrl configs.

Two entry points. :func:`translate` takes a config dict that may mix apexrl keys with RLlib's (an
``ApexTrainer(config=...)``, a YAML file, ``--set num_workers=4``) and maps RLlib's keys by meaning through
the rows of :mod:`apexrl.config.rllib_keys`; apexrl's own keys win where both set one thing.
:func:`experiments` reads RLlib's experiment-file format (named experiments with ``env``, ``run``,
``stop``, ``config``), where every key must be one RLlib knows: a key apexrl cannot honour is refused in
one line, and keys that change nothing here are listed once.

    cartpole-apex-dqn:            # -> ("cartpole-apex-dqn", {"agent": "dqn", "env": {...}, "stop": {...}, ...})
        env: CartPole-v0
        run: APEX
        stop: {episode_reward_mean: 150, timesteps_total: 250000}
        config: {num_workers: 3, training_intensity: 4, ...}
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from apexrl.config.rllib_keys import (
    BY_NAME,
    ITERATION_S,
    KEYS,
    OU_TYPES,
    SECTIONS,
    Ctx,
    dpg_noise,
    dqn_exploration,
    refuse,
)
from apexrl.config.schema import Config, ConfigError, to_dict

log = logging.getLogger("apexrl.config")

RUNS = {"APEX": "dqn", "DQN": "dqn", "APEX_DDPG": "dpg", "DDPG": "dpg", "TD3": "dpg", "R2D2": "r2d2"}
# What the algorithm a file's run names is, where apexrl's defaults differ (DDPG has no TD3 fixes).
IDENTITY: dict[str, dict[str, Any]] = {
    "DDPG": {"dpg.twin_critics": False, "dpg.policy_delay": 1, "dpg.target_noise": 0.0},
    "APEX_DDPG": {"dpg.twin_critics": False, "dpg.policy_delay": 1, "dpg.target_noise": 0.0},
    "TD3": {"dpg.twin_critics": True, "dpg.policy_delay": 2, "dpg.target_noise": 0.2},
}
DDPG_KEYS = {"actor_hiddens", "critic_hiddens", "actor_lr", "critic_lr", "tau", "twin_q", "policy_delay",
             "smooth_target_policy", "target_noise", "target_noise_clip", "exploration_config.ou_base_scale",
             "exploration_config.ou_theta", "exploration_config.ou_sigma"}
# Stop criteria of an experiment (RLlib result keys) -> apexrl's stop keys.
STOP = {
    "episode_reward_mean": "stop.train_return",
    "sampler_results/episode_reward_mean": "stop.train_return",
    "env_runners/episode_return_mean": "stop.train_return",
    "evaluation/episode_reward_mean": "stop.target_return",
    "evaluation/sampler_results/episode_reward_mean": "stop.target_return",
    "timesteps_total": "stop.max_env_steps",
    "num_env_steps_sampled": "stop.max_env_steps",
    "time_total_s": "stop.max_time_s",
    "training_iteration": "stop.max_time_s",
}
EXPERIMENT_KEYS = {"env", "run", "stop", "config", "checkpoint_freq", "checkpoint_at_end", "keep_checkpoints_num",
                   "num_samples", "local_dir", "storage_path", "verbose"}
APEXRL_TOP = {"seed", "name", "agent"} | {k for k in to_dict(Config())}


def _flat(raw: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if k in SECTIONS and isinstance(v, Mapping):
            out.update({f"{k}.{sub}": sv for sub, sv in v.items()})
        else:
            out[k] = v
    return out


def _put(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value


def merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
    return out


def _rllib_multiagent(key: str, value: Any) -> bool:
    """RLlib's ``multiagent`` section (policies, mapping function...), not apexrl's of the same name."""
    ours = set(to_dict(Config())["multiagent"])
    return key == "multiagent" and isinstance(value, Mapping) and not set(value) <= ours


def is_rllib_key(key: str) -> bool:
    return key in BY_NAME or key.split(".")[0] in SECTIONS


def infer_run(flat: Mapping[str, Any], agent: Any = None) -> str:
    """The RLlib algorithm a config dict without ``run`` describes: DDPG's keys or ``agent: dpg`` -> APEX_DDPG."""
    if agent == "dpg" or DDPG_KEYS & set(flat) or flat.get("exploration_config.type") in OU_TYPES:
        return "APEX_DDPG"
    if agent == "r2d2" or flat.get("model.use_lstm"):
        return "R2D2"
    return "APEX"


def translate(raw: Mapping[str, Any], run: str | None = None, host_cpus: int | None = None,
              strict: bool = False, identity: bool = True, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A nested apexrl dict from ``raw``'s apexrl keys and its RLlib keys mapped by meaning.

    ``strict``: every key must be RLlib's (an experiment file's ``config``); else keys of neither kind are
    left for the schema, which names them with a suggestion. ``identity``: set what the algorithm is (DDPG
    has no TD3 fixes) where the keys do not; off when a few keys change an existing config, ``base``, whose
    values (e.g. its batch size) the conversions then read."""
    ours: dict[str, Any] = {}
    theirs: dict[str, Any] = {}
    for k, v in raw.items():
        if strict or (k == "env" and isinstance(v, str)) or (k not in APEXRL_TOP and is_rllib_key(k)) or \
                _rllib_multiagent(k, v):
            theirs[k] = v
        else:
            ours[k] = v
    flat = _flat(theirs)
    if not flat:
        return dict(raw)
    run = run or infer_run(flat, ours.get("agent"))
    unknown = sorted(k for k in flat if k not in BY_NAME)
    if unknown:
        raise ConfigError(f"RLlib key(s) {', '.join(unknown)} not supported by apexrl (it runs Ape-X DQN, "
                          "DDPG/TD3 and R2D2 on gymnasium and PettingZoo envs); remove them, see docs/coming-from-rllib.md")
    ctx = Ctx(flat, run, host_cpus or os.cpu_count() or 1, merge(dict(base or {}), ours))
    dotted: dict[str, Any] = {"agent": RUNS[run], **(IDENTITY.get(run, {}) if identity else {})}
    for row in KEYS:  # table order: a key's row sees the whole config through ctx
        if row.rllib in flat:
            dotted.update(row.apply(flat[row.rllib], ctx))
    if any(k.startswith("exploration_config.") for k in flat):  # the section as RLlib read it, with its defaults
        dotted.update(dpg_noise(ctx) if ctx.dpg else dqn_exploration(ctx))
    if ctx.notes:
        log.warning("RLlib keys accepted with no effect here: %s", "; ".join(dict.fromkeys(ctx.notes)))
    out: dict[str, Any] = {}
    for k, v in dotted.items():
        _put(out, k, v)
    return merge(out, ours)


def is_experiment_file(data: Mapping[str, Any]) -> bool:
    return bool(data) and all(isinstance(v, Mapping) and "run" in v for v in data.values())


def _stop(stop: Any, iteration_s: float) -> dict[str, Any]:
    if not isinstance(stop, Mapping):
        raise ConfigError(f"an experiment's 'stop' must be a mapping of result keys to values, got {stop!r}")
    bad = sorted(set(stop) - set(STOP))
    if bad:
        raise ConfigError(f"stop criteria {', '.join(bad)} are not supported; allowed: {', '.join(STOP)}")
    out: dict[str, Any] = {}
    for k, v in stop.items():
        key = STOP[k]
        value = float(v) * iteration_s if k == "training_iteration" else v  # an iteration is that many seconds
        if key in out:  # both a time and an iteration budget, or two spellings: the stricter wins
            value = max(out[key], value) if key.endswith("return") else min(out[key], value)
        out[key] = value
    return out


def experiments(data: Mapping[str, Any], host_cpus: int | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Each experiment of an RLlib experiment file as (name, apexrl config dict), in file order."""
    out = []
    for name, exp in data.items():
        bad = sorted(set(exp) - EXPERIMENT_KEYS)
        if bad:
            raise ConfigError(f"experiment '{name}': key(s) {', '.join(bad)} not supported; allowed: "
                              f"{', '.join(sorted(EXPERIMENT_KEYS))}")
        run = exp["run"]
        if run not in RUNS:
            raise ConfigError(f"experiment '{name}': run '{run}' is not supported; allowed: {', '.join(RUNS)}")
        if int(exp.get("num_samples", 1)) != 1:
            raise refuse("num_samples", exp["num_samples"], "one run per experiment; for repeats and grids use "
                         "`apexrl tune`")
        config = dict(exp.get("config") or {})
        if "env" in exp:
            config["env"] = exp["env"]
        cfg = translate(config, run=run, host_cpus=host_cpus, strict=True)
        iteration_s = float(config.get("min_time_s_per_iteration") or ITERATION_S)
        for k, v in _stop(exp.get("stop") or {}, iteration_s).items():
            _put(cfg, k, v)
        if exp.get("checkpoint_freq"):
            _put(cfg, "checkpoint.every_reports", int(exp["checkpoint_freq"]))  # a report is an iteration
        if exp.get("keep_checkpoints_num"):
            _put(cfg, "checkpoint.keep", int(exp["keep_checkpoints_num"]))
        out.append((str(name), cfg))
    return out


def table() -> str:
    """The mapping as a Markdown table (docs/coming-from-rllib.md holds this text)."""
    lines = ["| RLlib key | apexrl | meaning here |", "|---|---|---|"]
    for row in KEYS:
        how = " ".join(row.how.split()).replace("|", "\\|")
        lines.append(f"| `{row.rllib}` | {f'`{row.sets}`' if row.sets else '—'} | {how} |")
    return "\n".join(lines)
