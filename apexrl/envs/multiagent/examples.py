"""Small multi-agent envs in the shapes users bring, for examples, tests and docs.

``MultiAgentCartPole`` is RLlib's ``make_multi_agent("CartPole-v1")`` as RLlib's multi-agent examples use it
(agents ``0 .. num_agents - 1``, each balancing its own pole, an agent's episode ending on its own, ``"__all__"``
when every pole is down), written without RLlib so that it runs where RLlib is not installed."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class MultiAgentCartPole:
    """Dict in, dict out, as RLlib's ``MultiAgentEnv``; ``config``: ``{"num_agents": 2}``."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        n = int((config or {}).get("num_agents", 2))
        self.envs = [gym.make("CartPole-v1") for _ in range(n)]
        self.possible_agents = list(range(n))
        self.agents = list(self.possible_agents)
        self.observation_spaces = {i: e.observation_space for i, e in enumerate(self.envs)}
        self.action_spaces = {i: e.action_space for i, e in enumerate(self.envs)}
        self._done: set[int] = set()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self._done = set()
        self.agents = list(self.possible_agents)
        obs = {i: e.reset(seed=None if seed is None else seed + i)[0] for i, e in enumerate(self.envs)}
        return obs, {i: {} for i in obs}

    def step(self, actions: dict[int, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rew, term, trunc, info = {}, {}, {}, {}, {}
        for i, a in actions.items():
            obs[i], rew[i], term[i], trunc[i], info[i] = self.envs[i].step(a)
            if term[i] or trunc[i]:
                self._done.add(i)
        term["__all__"] = trunc["__all__"] = len(self._done) == len(self.envs)
        self.agents = [i for i in self.possible_agents if i not in self._done]
        return obs, rew, term, trunc, info

    def close(self) -> None:
        for e in self.envs:
            e.close()
