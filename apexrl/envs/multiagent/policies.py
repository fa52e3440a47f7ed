"""Which policy plays each agent of a multi-agent env, found once at start-up from ``multiagent`` and the env's
agents: a table, a mapping function (RLlib's ``policy_mapping_fn``), or by default one policy shared by agents
with the same spaces (one per distinct pair of spaces otherwise). The result is a plain table
``{agent id: policy id}`` that config.yaml keeps, so a resume or an evaluation needs no function."""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from apexrl.config import MultiAgentConfig
from apexrl.envs.multiagent.make import AgentView, MultiAgentSpecError, same_space


@dataclass(frozen=True)
class PolicyPlan:
    mapping: dict[str, str]  # str(agent id) -> policy id, every possible agent
    ids: tuple[str, ...]  # the policies, in the order of their first agent
    trained: tuple[str, ...]  # those the learner updates
    spaces: dict[str, tuple[gym.Space, gym.Space]]  # policy -> (observation rows' space, action space)

    def agents_of(self, pid: str) -> list[str]:
        return [a for a, p in self.mapping.items() if p == pid]


def _function(path: str) -> Callable[..., Any]:
    module, _, name = path.replace(":", ".").rpartition(".")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise MultiAgentSpecError(f"config key 'multiagent.policy_mapping' = '{path}': cannot import it "
                                  f"({type(e).__name__}: {e})") from None
    if not callable(fn):
        raise MultiAgentSpecError(f"config key 'multiagent.policy_mapping' = '{path}' is not a function")
    return fn


def _call(fn: Callable[..., Any], agent: Any) -> Any:
    """As RLlib calls it, ``fn(agent_id, episode, worker=..., **kwargs)``; a function of the agent alone too.
    There is no episode here: apexrl maps each agent once."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn(agent, None)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params) or len(positional) >= 2:
        kwargs = {"worker": None} if any(p.kind == p.VAR_KEYWORD or p.name == "worker" for p in params) else {}
        return fn(agent, None, **kwargs)
    return fn(agent)


def _mapped(ma: MultiAgentConfig, agents: list[Any], env_id: str) -> dict[str, str] | None:
    m = ma.policy_mapping
    if m is None:
        return None
    out: dict[str, str] = {}
    if isinstance(m, Mapping):
        for a in agents:
            hit = next((p for pat, p in m.items() if str(pat) == str(a) or fnmatch.fnmatchcase(str(a), str(pat))), None)
            if hit is None:
                raise MultiAgentSpecError(f"config key 'multiagent.policy_mapping' maps no policy to agent '{a}' of env "
                                          f"'{env_id}' (its agents: {', '.join(map(str, agents))}); add it or a "
                                          "pattern such as '*'")
            out[str(a)] = str(hit)
        return out
    fn = _function(m) if isinstance(m, str) else m
    for a in agents:
        try:
            pid = _call(fn, a)
        except Exception as e:
            raise MultiAgentSpecError(f"config key 'multiagent.policy_mapping': the function raised "
                                      f"{type(e).__name__}: {e} for agent '{a}'") from None
        if not isinstance(pid, (str, int)):
            raise MultiAgentSpecError(f"config key 'multiagent.policy_mapping': the function gave {pid!r} for agent "
                                      f"'{a}'; it must return a policy id")
        out[str(a)] = str(pid)
    return out


def _group_name(agents: list[str], taken: set[str]) -> str:
    """A policy's default name: its agents' common prefix without the index (``adversary_0`` -> ``adversary``)."""
    name = re.sub(r"[_\-]?\d+$", "", agents[0]) or agents[0]
    return name if name not in taken else agents[0]


def _by_spaces(views: dict[Any, AgentView], policy_id: str) -> dict[str, str]:
    groups: list[list[Any]] = []
    for a, v in views.items():
        for g in groups:
            first = views[g[0]]
            if same_space(first.observation_space, v.observation_space) and first.action_space == v.action_space:
                g.append(a)
                break
        else:
            groups.append([a])
    if len(groups) == 1:
        return {str(a): policy_id for a in groups[0]}
    out: dict[str, str] = {}
    taken: set[str] = set()
    for g in groups:
        name = _group_name([str(a) for a in g], taken)
        taken.add(name)
        out.update({str(a): name for a in g})
    return out


def plan_policies(views: dict[Any, AgentView], ma: MultiAgentConfig, env_id: str) -> PolicyPlan:
    """Every agent's policy, checked: a mapping to an unknown policy, a policy whose agents' spaces differ or do
    not fit the spaces it declares, and policies_to_train naming no trained policy are one line each."""
    agents = list(views)
    if not agents:
        raise MultiAgentSpecError(f"env '{env_id}' names no agents (possible_agents is empty)")
    declared = dict(ma.policies or {})
    mapping = _mapped(ma, agents, env_id)
    if mapping is None:
        if len(declared) > 1:
            raise MultiAgentSpecError(f"config key 'multiagent.policies' names {len(declared)} policies "
                                      f"({', '.join(declared)}) but no multiagent.policy_mapping says which agent "
                                      "plays which; add a table {agent id or pattern: policy} or a function")
        mapping = _by_spaces(views, ma.policy_id)
    ids = tuple(dict.fromkeys(mapping.values()))
    if declared:
        for a, p in mapping.items():
            if p not in declared:
                raise MultiAgentSpecError(f"config key 'multiagent.policy_mapping' maps agent '{a}' to policy '{p}', "
                                          f"not one of multiagent.policies: {', '.join(declared)}")
        unused = [p for p in declared if p not in ids]
        if unused:
            raise MultiAgentSpecError(f"policy '{unused[0]}' (multiagent.policies) plays no agent of env '{env_id}': "
                                      f"multiagent.policy_mapping gives {mapping}")
        ids = tuple(p for p in declared)
    by_str = {str(a): views[a] for a in agents}
    spaces: dict[str, tuple[gym.Space, gym.Space]] = {}
    for p in ids:
        mine = [a for a in mapping if mapping[a] == p]
        first = by_str[mine[0]]
        for a in mine[1:]:
            v = by_str[a]
            if not (same_space(v.observation_space, first.observation_space) and v.action_space == first.action_space):
                raise MultiAgentSpecError(
                    f"policy '{p}' plays agents '{mine[0]}' and '{a}' of env '{env_id}', whose spaces differ "
                    f"({first.observation_space}, {first.action_space} vs {v.observation_space}, {v.action_space}); "
                    "map them to different policies, or pad them (SuperSuit's pad_observations_v0 / "
                    "pad_action_space_v0)")
        spec = declared.get(p, {})
        for kind, own in (("observation_space", first.raw_observation_space), ("action_space", first.action_space)):
            want = spec.get(kind)
            if want is not None and str(want) != str(own):
                raise MultiAgentSpecError(f"policy '{p}' declares {kind} {want} but agent '{mine[0]}' it plays has "
                                          f"{own} (env '{env_id}')")
        spaces[p] = (first.observation_space, first.action_space)
    trained = tuple(p for p in ids if ma.policies_to_train is None or p in ma.policies_to_train)
    if ma.policies_to_train is not None:
        unknown = [p for p in ma.policies_to_train if p not in ids]
        if unknown:
            raise MultiAgentSpecError(f"config key 'multiagent.policies_to_train' names '{unknown[0]}', not a policy "
                                      f"of this run ({', '.join(ids)})")
    if not trained:
        raise MultiAgentSpecError("config key 'multiagent.policies_to_train' is empty: no policy would learn")
    return PolicyPlan(mapping, ids, trained, spaces)
