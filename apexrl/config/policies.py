"""The ``multiagent`` section's policies, checked before any env exists: which ids, which agent and which of
the run's settings each policy changes. Which agent plays with which policy needs the env's agents, and is
resolved at start-up (``envs/multiagent/policies.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from apexrl.config.schema import AGENTS, ConfigError

if TYPE_CHECKING:
    from apexrl.config.schema import Config

SPEC_KEYS = ("agent", "config", "observation_space", "action_space")
# What a policy may set for itself: what its network, replay and learner are. Shards, devices and how often
# weights go out are the run's (one learner process serves every policy, one publication carries them all).
OWN_SECTIONS = ("network", "learner", "replay", "dpg")
RUN_WIDE = {"replay.num_shards", "learner.device", "learner.num_gpus", "learner.num_cpus", "learner.prefetch",
            "learner.batches_per_request", "learner.publish_period"}


def normalize(cfg: Config) -> Config:
    """``cfg`` with ``multiagent.policies`` as ``{id: {agent, config, ...}}`` (a list of ids is accepted: each
    with the run's settings), every policy's overrides as dotted apexrl keys, and each checked with one line."""
    ma = cfg.multiagent
    raw = ma.policies
    if raw is None:
        raw = {}
    if isinstance(raw, (list, tuple, set, frozenset)):
        raw = {str(p): {} for p in raw}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config key 'multiagent.policies' = {raw!r} must be a mapping {{id: {{agent, config}}}} "
                          "or a list of ids")
    policies = {str(pid): _spec(str(pid), spec, cfg) for pid, spec in raw.items()}
    train = ma.policies_to_train
    if train is not None:
        unknown = [p for p in train if p not in policies]
        if unknown and policies:
            raise ConfigError(f"config key 'multiagent.policies_to_train' = {list(train)} names '{unknown[0]}', "
                              f"not one of multiagent.policies: {', '.join(policies)}")
    _check_mapping(ma.policy_mapping)
    if len(policies) == 1 and ma.policy_mapping is None:  # one policy: the shared one, named so
        (pid, spec), = policies.items()
        if train is not None and pid not in train:
            raise ConfigError(f"config key 'multiagent.policies_to_train' = {list(train)}: the one policy '{pid}' "
                              "would never train; list it, or leave policies_to_train out")
        bare = dataclasses.replace(cfg, multiagent=dataclasses.replace(ma, policies={}, policies_to_train=None))
        return bare.replace(**spec["config"], **({"agent": spec["agent"]} if spec.get("agent") else {}),
                            **{"multiagent.policy_id": pid})
    return dataclasses.replace(cfg, multiagent=dataclasses.replace(ma, policies=policies))


def _spec(pid: str, spec: Any, cfg: Config) -> dict[str, Any]:
    key = f"multiagent.policies.{pid}"
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping) and (isinstance(spec, (tuple, list)) or hasattr(spec, "action_space")):
        from apexrl.config.rllib_multiagent import policy_spec

        spec = policy_spec(pid, spec)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"config key '{key}' = {spec!r} must be a mapping with keys {', '.join(SPEC_KEYS)} (or empty)")
    extra = [k for k in spec if k not in SPEC_KEYS]
    if extra:
        raise ConfigError(f"unknown config key '{key}.{extra[0]}'; allowed: {', '.join(SPEC_KEYS)}")
    out = dict(spec)
    agent = out.get("agent")
    if agent is not None and agent not in AGENTS:
        raise ConfigError(f"config key '{key}.agent' = {agent!r}; allowed: {', '.join(AGENTS)}")
    out["config"] = overrides(pid, out.get("config"), cfg)
    return out


def overrides(pid: str, given: Any, cfg: Config) -> dict[str, Any]:
    """A policy's ``config`` as the dotted apexrl keys it changes (RLlib's keys, e.g. ``lr`` or ``gamma``,
    mapped by meaning as anywhere else)."""
    from apexrl.config.schema import flatten, to_dict

    key = f"multiagent.policies.{pid}.config"
    if not given:
        return {}
    if not isinstance(given, Mapping):
        raise ConfigError(f"config key '{key}' = {given!r} must be a mapping of settings, e.g. {{learner.lr: 1e-3}}")
    dotted: dict[str, Any] = {}
    for k, v in given.items():
        if str(k) in OWN_SECTIONS and isinstance(v, Mapping):
            dotted.update({f"{k}.{kk}": vv for kk, vv in v.items()})
        else:
            dotted[str(k)] = v
    cfg = dataclasses.replace(cfg, multiagent=dataclasses.replace(cfg.multiagent, policies={}))  # no recursion
    try:
        changed = cfg.replace(**dotted)
    except ConfigError as e:
        raise ConfigError(f"config key '{key}': {e}") from None
    before, after = flatten(to_dict(cfg)), flatten(to_dict(changed))
    out = {k: getattr_dotted(changed, k) for k in after if after[k] != before.get(k)}
    for k in out:
        if k.split(".")[0] not in OWN_SECTIONS or k in RUN_WIDE:
            raise ConfigError(f"config key '{key}' sets '{k}', which is the run's, not a policy's; a policy sets "
                              f"its own {', '.join(s + '.*' for s in OWN_SECTIONS)} (except "
                              f"{', '.join(sorted(RUN_WIDE))})")
    return out


def getattr_dotted(cfg: Any, key: str) -> Any:
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return list(cfg) if isinstance(cfg, tuple) else cfg


def _check_mapping(mapping: Any) -> None:
    ok = mapping is None or callable(mapping) or (isinstance(mapping, str) and "." in mapping) or (
        isinstance(mapping, Mapping) and all(isinstance(v, str) for v in mapping.values()))
    if not ok:
        raise ConfigError(f"config key 'multiagent.policy_mapping' = {mapping!r}; allowed: a table {{agent id or "
                          "pattern: policy id}, a function's dotted path 'pkg.module.fn', or (in Python) the function")


def policy_config(cfg: Config, pid: str) -> Config:
    """The config policy ``pid`` trains with: the run's, with its own agent and overrides."""
    spec = cfg.multiagent.policies.get(pid, {})
    changes = dict(spec.get("config") or {})
    if spec.get("agent"):
        changes["agent"] = spec["agent"]
    changes["multiagent.policy_id"] = pid
    return cfg.replace(**changes)
