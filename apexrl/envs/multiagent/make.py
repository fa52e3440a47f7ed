"""Building multi-agent envs from the config, and each agent's view of its observations.

An env is multi-agent when what its id or creator gives is a PettingZoo or RLlib multi-agent env (found out
once at start-up, then kept as ``env.api``). Each agent's observation becomes one row as a single-agent
env's would (``envs/structured.py``: Dict observations with an ``action_mask`` entry, PettingZoo's classic
games, become packed rows whose mask the Q-network and the double-DQN target read), so the rest of the
runtime sees arrays.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from apexrl.config import EnvConfig
from apexrl.envs.multiagent.games import Game, as_game
from apexrl.envs.spaces import MASK_KEY, PackedSpace
from apexrl.envs.structured import NoLegalActionError, codec_for

MULTI_AGENT_APIS = ("aec", "parallel", "rllib")


class MultiAgentSpecError(ValueError):
    """A multi-agent env apexrl cannot train as configured; the message says why and what to change."""


def is_multiagent(cfg: EnvConfig) -> bool:
    return cfg.api in MULTI_AGENT_APIS


def _takes_config(creator: Callable[..., Any]) -> bool:
    """RLlib's creators take ``env_config`` as one argument; PettingZoo's ``env(**kwargs)`` take keywords."""
    try:
        params = [p for p in inspect.signature(creator).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # builtins and some C types: call them as RLlib would
        return True
    if not params:
        return False
    first = params[0]
    return first.default is inspect.Parameter.empty or first.name in ("config", "env_config", "env_context")


def call_any_creator(creator: Callable[..., Any], config: dict[str, Any]) -> Any:
    """Build what ``creator`` makes, calling it the way it expects its arguments."""
    from apexrl.envs.sources import EnvContext

    if _takes_config(creator):
        return creator(EnvContext(config))
    return creator(**config)


def make_game(cfg: EnvConfig, creator: Callable[..., Any] | None = None, render_mode: str | None = None) -> Game:
    from apexrl.envs.sources import resolve_creator

    creator = creator or resolve_creator(cfg.id, cfg.creator)
    if creator is None:
        raise MultiAgentSpecError(f"env '{cfg.id}' (env.api={cfg.api}) is a gymnasium id, not a multi-agent env")
    config = dict(cfg.kwargs)
    if render_mode is not None:
        config["render_mode"] = render_mode
    game = as_game(call_any_creator(creator, config))
    if game is None:
        raise MultiAgentSpecError(f"env '{cfg.id}' (env.api={cfg.api}) did not give a PettingZoo or RLlib "
                                  "multi-agent env; set env.api=gymnasium or auto")
    return game


class AgentView:
    """One agent's observations as rows of one shape and dtype (packed where its space needs it)."""

    def __init__(self, game: Game, agent: Any, env_id: str, action_mask: str, ignore: tuple[str, ...],
                 info: dict[str, Any] | None = None) -> None:
        self.agent = agent
        space, self.action_space = game.observation_space(agent), game.action_space(agent)
        self.raw_observation_space = space
        if action_mask == "auto":
            dict_mask = isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces
            action_mask = "observation" if dict_mask else "info" if MASK_KEY in (info or {}) else "none"
        try:
            self.codec = codec_for(space, self.action_space, f"{env_id}' agent '{agent}", action_mask, ignore)
        except ValueError as e:
            raise MultiAgentSpecError(str(e)) from None
        self.env_id = env_id
        if self.codec is not None:
            self.observation_space: gym.Space = PackedSpace(self.codec)
        elif isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.number):
            self.observation_space = space
        else:
            raise MultiAgentSpecError(f"env '{env_id}' agent '{agent}' has observation space {space}; apexrl needs "
                                      "numeric array leaves")
        self.masked = self.codec is not None and self.codec.mask_leaf is not None

    def row(self, obs: Any, info: dict[str, Any] | None, goes_on: bool = True) -> np.ndarray:
        if self.codec is None:
            return np.asarray(obs, dtype=self.observation_space.dtype).reshape(self.observation_space.shape)
        mask = (info or {}).get(MASK_KEY) if self.codec.mask_source == "info" else None
        row = self.codec.pack(obs, mask)
        if goes_on and self.masked and not self.codec.legal(row[None])[0].any():
            raise NoLegalActionError(f"env '{self.env_id}' gave agent '{self.agent}' an action mask with no legal "
                                     "action where it must act")
        return row


def same_space(a: gym.Space, b: gym.Space) -> bool:
    if isinstance(a, PackedSpace) and isinstance(b, PackedSpace):
        return a.codec.leaves == b.codec.leaves
    return a == b


def agent_views(game: Game, cfg: EnvConfig, first: dict[Any, tuple[Any, dict[str, Any]]] | None = None
                ) -> dict[Any, AgentView]:
    """Every possible agent's view; ``first``: the reset's observations, whose infos may carry masks."""
    infos = {a: info for a, (_, info) in (first or {}).items()}
    return {a: AgentView(game, a, cfg.id, cfg.action_mask, tuple(cfg.ignore_observation), infos.get(a))
            for a in game.possible_agents}


def game_views(cfg: EnvConfig, seed: int = 0) -> dict[Any, AgentView]:
    """Every agent's view of a fresh copy of the env (reset once: masks may come in its infos)."""
    game = make_game(cfg)
    try:
        return agent_views(game, cfg, game.reset(seed=seed).to_act)
    finally:
        game.close()


def check_game(cfg: EnvConfig, game: Game) -> tuple[EnvConfig, gym.Space, gym.Space]:
    """Reset and play ``game`` for a few steps with random legal actions, so a broken env fails at start-up
    with one line; ``cfg`` with ``api`` as found and the first agent's spaces (which policy plays whom is
    ``policies.py``'s)."""
    from apexrl.envs.multiagent.opponents import random_actions

    try:
        turn = game.reset(seed=0)
        views = agent_views(game, cfg, turn.to_act)
        if not views:
            raise MultiAgentSpecError(f"env '{cfg.id}' names no agents (possible_agents is empty)")
        first = next(iter(views.values()))
        obs_space, act_space = first.observation_space, first.action_space
        rng = np.random.default_rng(0)
        for _ in range(8):
            if turn.over:
                break
            rows = {a: views[a].row(o, info) for a, (o, info) in turn.to_act.items()}
            turn = game.step(random_actions(views, rows, rng))
    except (MultiAgentSpecError, NoLegalActionError):
        raise
    except Exception as e:
        text = str(e).strip().splitlines()
        raise MultiAgentSpecError(f"env '{cfg.id}' failed on reset or its first steps: {type(e).__name__}"
                                  f"{': ' + text[0] if text else ''}") from None
    finally:
        game.close()
    return dataclasses.replace(cfg, api=getattr(game, "kind", cfg.api)), obs_space, act_space
