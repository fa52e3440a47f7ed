"""RLlib's multi-agent keys (``multiagent``, ``multi_agent``, and ``multi_agent()``'s ``to_dict()`` keys at the top
level) mapped onto ``multiagent.policies``, ``multiagent.policy_mapping`` and ``multiagent.policies_to_train``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apexrl.config.rllib_base import Ctx, refuse


def policy_spec(pid: str, spec: Any) -> dict[str, Any]:
    """RLlib's ``PolicySpec`` or ``(cls, obs_space, act_space, config)``: the class is RLlib's (apexrl trains its
    own agents); the spaces are checked against the agents the policy plays; the config overrides the run's."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return dict(spec)
    if hasattr(spec, "observation_space") and hasattr(spec, "action_space"):
        obs, act, conf = spec.observation_space, spec.action_space, getattr(spec, "config", None)
    elif isinstance(spec, (tuple, list)) and len(spec) == 4:
        _, obs, act, conf = spec
    else:
        raise refuse("multiagent", {"policies": {pid: spec}}, "give each policy as a PolicySpec, "
                     "(policy_class, observation_space, action_space, config), or None")
    out: dict[str, Any] = {"config": dict(conf or {})}
    if obs is not None:
        out["observation_space"] = str(obs)
    if act is not None:
        out["action_space"] = str(act)
    return out


def multiagent_section(v: Any, c: Ctx) -> dict[str, Any]:
    """RLlib's policies, mapping function and policies to train; one policy (or none named) is the shared one."""
    if not isinstance(v, Mapping):
        raise refuse("multiagent", v, "give a section: {policies: ..., policy_mapping_fn: ...}")
    extra = sorted(set(v) - {"policies", "policy_mapping_fn", "policies_to_train", "count_steps_by",
                             "policy_map_capacity", "policy_map_cache", "policy_states_are_swappable"})
    if extra:
        raise refuse("multiagent", {extra[0]: v[extra[0]]}, "apexrl reads policies, policy_mapping_fn and "
                     "policies_to_train")
    policies = v.get("policies") or {}
    if not isinstance(policies, Mapping):
        policies = {str(p): None for p in policies}
    train = v.get("policies_to_train")
    if train is not None and callable(train):
        raise refuse("multiagent", {"policies_to_train": train}, "give the list of policy ids to train (a "
                     "function of the batch is not supported)")
    out: dict[str, Any] = {}
    if len(policies) == 1 and v.get("policy_mapping_fn") is None:
        pid = str(next(iter(policies)))
        if train is not None and pid not in list(train):
            raise refuse("multiagent", {"policies_to_train": list(train)}, f"the one policy '{pid}' would never "
                         "train; list it, or leave policies_to_train out")
        spec = policy_spec(pid, policies[pid])
        if spec.get("config"):
            out["multiagent.policies"] = {pid: spec}
        return {**out, "multiagent.policy_id": pid}
    if policies:
        out["multiagent.policies"] = {str(p): policy_spec(str(p), s) for p, s in policies.items()}
    if v.get("policy_mapping_fn") is not None:
        out["multiagent.policy_mapping"] = v["policy_mapping_fn"]
    if train is not None:
        out["multiagent.policies_to_train"] = [str(p) for p in train]
    return out


def new_multi_agent(key: str) -> Any:
    """The newer ``config.multi_agent(policies=..., policy_mapping_fn=..., policies_to_train=...)`` as
    ``to_dict()`` writes it: three top-level keys, read together by the ``policies`` row."""
    def apply(v: Any, c: Ctx) -> dict[str, Any]:
        if key != "policies" and c.get("policies") is not None:
            return {}
        parts = {k: c.get(k) for k in ("policies", "policy_mapping_fn", "policies_to_train") if c.get(k) is not None}
        return multiagent_section(parts, c)
    return apply
