"""Who plays the other seats of a game in evaluations (``multiagent.opponent``): a uniform random legal player,
a saved snapshot of a policy (a checkpoint file, or a run dir: its ``best.pt``), or your own function
``fn(agent, observation, info) -> action``, called with the agent's observation as the env gave it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from apexrl.config import Config
from apexrl.envs.multiagent.make import AgentView

KEYWORDS = ("auto", "random", "self")


Seat = tuple[int, Any]  # (game copy, agent): one call covers the opponent's seats in every game


class Opponent(Protocol):
    def act(self, seats: dict[Seat, tuple[Any, dict[str, Any]]], rows: dict[Seat, np.ndarray],
            rng: np.random.Generator) -> dict[Seat, Any]:
        """Actions for ``seats`` (their raw observations and infos; ``rows``: as packed), in one batch."""
        ...


def as_env_action(a: Any) -> Any:
    a = np.asarray(a)
    return a.item() if a.ndim == 0 else a


def policy_for(made: Any) -> Callable[[Any], Any]:
    """Agent -> the policy that plays it, from ``System.make_eval_policies``' one policy or ``{agent id: policy}``."""
    return (lambda agent: made[str(agent)]) if isinstance(made, dict) else (lambda agent: made)


def random_actions(views: dict[Any, AgentView], rows: dict[Any, np.ndarray], rng: np.random.Generator
                   ) -> dict[Any, Any]:
    """A uniform random legal action for every agent in ``rows``."""
    return {agent: random_action(views[agent], row, rng) for agent, row in rows.items()}


def random_action(view: AgentView, row: np.ndarray, rng: np.random.Generator) -> Any:
    if view.masked:
        return int(rng.choice(np.flatnonzero(view.codec.legal(row[None])[0])))
    return as_env_action(view.action_space.sample())


class RandomOpponent:
    def __init__(self, views: dict[Any, AgentView]) -> None:
        self.views = views

    def act(self, seats: dict[Seat, tuple[Any, dict[str, Any]]], rows: dict[Seat, np.ndarray],
            rng: np.random.Generator) -> dict[Seat, Any]:
        return {key: random_action(self.views[key[1]], row, rng) for key, row in rows.items()}


class SnapshotOpponent:
    """A saved run, greedy: what its ``best.pt`` (or any checkpoint) plays; a run of several policies plays each
    seat with the policy its own mapping gave that agent."""

    def __init__(self, path: str, rows: int) -> None:
        from apexrl import checkpoint as ckpt
        from apexrl.config import from_dict
        from apexrl.runtime.assembly import assemble

        where, state = ckpt.resolve(Path(path), best=True)
        system = assemble(from_dict(state["config"]), num_actors=1)
        if any(getattr(m.builder, "name", "") == "r2d2" for m in (system.policies or (system,))):
            from apexrl.config import ConfigError

            raise ConfigError(f"config key 'multiagent.opponent' = '{path}' is a recurrent (r2d2) run, which cannot "
                              "be an evaluation opponent yet; use random, self, a dqn run or a function")
        net, weights = system.loaded_network(state["learner"]["net"])
        self.policy = policy_for(system.make_eval_policies(net, weights, rows, seed=0, explore=0.0))
        self.where = where

    def act(self, seats: dict[Seat, tuple[Any, dict[str, Any]]], rows: dict[Seat, np.ndarray],
            rng: np.random.Generator) -> dict[Seat, Any]:
        groups: dict[int, list[Seat]] = {}
        for key in rows:  # one forward pass per policy over every game's seats it plays
            groups.setdefault(id(self.policy(key[1])), []).append(key)
        out: dict[Seat, Any] = {}
        for keys in groups.values():
            chosen = self.policy(keys[0][1]).act(np.stack([rows[k] for k in keys]))
            out.update({k: as_env_action(c) for k, c in zip(keys, chosen)})
        return out


class FunctionOpponent:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def act(self, seats: dict[Seat, tuple[Any, dict[str, Any]]], rows: dict[Seat, np.ndarray],
            rng: np.random.Generator) -> dict[Seat, Any]:
        return {key: self.fn(key[1], obs, info) for key, (obs, info) in seats.items()}


def _function(name: str) -> Any:
    module, _, attr = name.replace(":", ".").rpartition(".")
    if not module:
        return None
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None
    return fn if callable(fn) else None


def check_opponent(value: str) -> None:
    """One line (ConfigError) for a ``multiagent.opponent`` that names nothing apexrl can play against."""
    from apexrl.config import ConfigError

    if value in KEYWORDS or Path(value).exists() or _function(value) is not None:
        return
    raise ConfigError(f"config key 'multiagent.opponent' = '{value}' is invalid; allowed: auto, random, self, a "
                      "checkpoint file or run dir (its best.pt plays), or an importable function "
                      "module.fn(agent, observation, info) -> action")


def make_opponent(cfg: Config, views: dict[Any, AgentView], rows: int) -> Opponent | None:
    """The evaluation's opponent; None when every agent plays with the policy (``self``)."""
    value = cfg.multiagent.opponent
    if value == "self" or value == "auto" and not (len(views) > 1 and all(v.masked for v in views.values())):
        return None
    if value in ("auto", "random"):
        return RandomOpponent(views)
    if Path(value).exists():
        return SnapshotOpponent(value, rows)
    check_opponent(value)
    return FunctionOpponent(_function(value))
