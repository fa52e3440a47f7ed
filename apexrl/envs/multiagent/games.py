"""Multi-agent envs of every common kind behind one small interface: a :class:`Game` says, after each step,
what every agent was paid, whose episode ended (with its final observation) and who must act next.

* PettingZoo AEC envs (turn-based: ``agent_iter`` / ``last`` / ``step``): one agent acts per step; agents
  whose episode ended are stepped with ``None`` here, as PettingZoo asks, and reported as ended.
* PettingZoo Parallel envs: every live agent acts each step; agents may leave mid-episode.
* RLlib's ``MultiAgentEnv`` (dict in, dict out, ``"__all__"``): the agents in the observation dict act next;
  RLlib's own ``PettingZooEnv`` / ``ParallelPettingZooEnv`` are unwrapped to the PettingZoo env inside.

A reward reaches its agent at the step it is given, whoever moved: in a turn-based game the loser's -1 comes
at the winner's move. The actor adds them up between an agent's moves (``runtime/multi_actor.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym

from apexrl.envs.contract import EnvContractError


class GameError(EnvContractError):
    """A multi-agent env broke its own protocol (an agent acting after its end, an action for an agent not
    asked to act); the message names the env, the agent and what happened."""


@dataclass
class Turn:
    """What one step did (or a reset: nothing paid, nobody ended)."""

    rewards: dict[Any, float] = field(default_factory=dict)  # paid to each agent during this step
    ended: dict[Any, tuple[Any, dict[str, Any], bool, bool]] = field(default_factory=dict)  # agent ->
    #                                                    (final observation, info, terminated, truncated)
    to_act: dict[Any, tuple[Any, dict[str, Any]]] = field(default_factory=dict)  # agent -> (obs, info)
    over: bool = False  # nobody left: reset before the next step


class Game(Protocol):
    possible_agents: list[Any]

    def observation_space(self, agent: Any) -> gym.Space: ...

    def action_space(self, agent: Any) -> gym.Space: ...

    def reset(self, seed: int | None = None) -> Turn: ...

    def step(self, actions: dict[Any, Any]) -> Turn: ...

    def close(self) -> None: ...


def _space(env: Any, kind: str, agent: Any) -> gym.Space:
    """An agent's space from PettingZoo's method, RLlib's ``get_*_space`` or its per-agent dict of spaces
    (looked up in that order: PettingZoo warns when its deprecated dicts are read)."""
    space = getattr(env, f"{kind}_space", None)
    if callable(space) and not isinstance(space, gym.Space):
        return space(agent)
    method = getattr(env, f"get_{kind}_space", None)
    if callable(method):
        return method(agent)
    per_agent = getattr(env, f"{kind}_spaces", None)
    if isinstance(per_agent, dict) and agent in per_agent:
        return per_agent[agent]
    if isinstance(space, gym.spaces.Dict) and agent in space.spaces:
        return space[agent]
    return space  # one space shared by every agent (old RLlib envs)


class _Base:
    def __init__(self, env: Any) -> None:
        self.env = env
        agents = getattr(env, "possible_agents", None)
        if agents is None:  # old RLlib envs name them in _agent_ids, or only once reset
            agents = sorted(getattr(env, "_agent_ids", ()) or ())
        self.possible_agents = list(agents)

    def observation_space(self, agent: Any) -> gym.Space:
        return _space(self.env, "observation", agent)

    def action_space(self, agent: Any) -> gym.Space:
        return _space(self.env, "action", agent)

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()


class AECGame(_Base):
    kind = "aec"

    def reset(self, seed: int | None = None) -> Turn:
        self.env.reset(seed=seed)
        return self._advance()

    def step(self, actions: dict[Any, Any]) -> Turn:
        agent = self.env.agent_selection
        if agent not in actions:
            raise GameError(f"it is agent '{agent}''s turn, but actions were given for {list(actions)}")
        self.env.step(actions[agent])
        return self._advance()

    def _advance(self) -> Turn:
        """Step ended agents with None until a live agent must act or nobody is left. ``last()`` gives each
        agent what it was paid since it last acted, so every reward is counted once."""
        turn, env = Turn(), self.env
        while env.agents:
            agent = env.agent_selection
            obs, reward, terminated, truncated, info = env.last()
            turn.rewards[agent] = turn.rewards.get(agent, 0.0) + float(reward)
            if terminated or truncated:
                turn.ended[agent] = (obs, info, bool(terminated), bool(truncated))
                env.step(None)
                continue
            turn.to_act[agent] = (obs, info)
            return turn
        turn.over = True
        return turn


class ParallelGame(_Base):
    kind = "parallel"

    def reset(self, seed: int | None = None) -> Turn:
        obs, infos = self.env.reset(seed=seed)
        return Turn(to_act={a: (o, (infos or {}).get(a, {})) for a, o in obs.items()}, over=not obs)

    def step(self, actions: dict[Any, Any]) -> Turn:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        infos = infos or {}
        turn = Turn(rewards={a: float(r) for a, r in rewards.items()})
        for a in set(terms) | set(truncs):
            if terms.get(a) or truncs.get(a):
                turn.ended[a] = (obs.get(a), infos.get(a, {}), bool(terms.get(a)), bool(truncs.get(a)))
        turn.to_act = {a: (o, infos.get(a, {})) for a, o in obs.items() if a not in turn.ended}
        turn.over = not turn.to_act
        return turn


class DictStepGame(_Base):
    """RLlib's ``MultiAgentEnv``: agents present in the returned observations act next; ``"__all__"`` ends
    the episode for everyone still in it."""

    kind = "rllib"

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self._alive: dict[Any, Any] = {}  # agent -> its last observation (a final one when the env gives none)

    def reset(self, seed: int | None = None) -> Turn:
        obs, infos = self.env.reset(seed=seed)
        self._alive = dict(obs)
        if not self.possible_agents:
            self.possible_agents = sorted(obs)
        return Turn(to_act={a: (o, (infos or {}).get(a, {})) for a, o in obs.items()}, over=not obs)

    def step(self, actions: dict[Any, Any]) -> Turn:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        infos = infos or {}
        turn = Turn(rewards={a: float(r) for a, r in rewards.items() if a != "__all__"})
        everyone = bool(terms.get("__all__")) or bool(truncs.get("__all__"))
        self._alive.update({a: o for a, o in obs.items()})
        for a in list(self._alive):
            term = bool(terms.get(a)) or bool(terms.get("__all__"))
            trunc = (bool(truncs.get(a)) or bool(truncs.get("__all__"))) and not term
            if term or trunc:
                turn.ended[a] = (obs.get(a, self._alive[a]), infos.get(a, {}), term, trunc)
                del self._alive[a]
        if not everyone:
            turn.to_act = {a: (o, infos.get(a, {})) for a, o in obs.items() if a not in turn.ended}
        turn.over = everyone or not self._alive
        return turn


def _class_names(obj: Any) -> set[str]:
    return {c.__name__ for c in type(obj).__mro__}


def as_game(obj: Any) -> Game | None:
    """``obj`` as a :class:`Game`, or None when it is not a multi-agent env (a gymnasium env, say)."""
    if isinstance(obj, gym.Env):
        return None
    names = _class_names(obj)
    if "ParallelPettingZooEnv" in names and hasattr(obj, "par_env"):
        return ParallelGame(obj.par_env)
    if "PettingZooEnv" in names and hasattr(obj, "env"):
        return AECGame(obj.env)
    if "AECEnv" in names or hasattr(obj, "agent_iter") and hasattr(obj, "last"):
        return AECGame(obj)
    if "ParallelEnv" in names:
        return ParallelGame(obj)
    if "MultiAgentEnv" in names or _dict_stepped(obj):
        return DictStepGame(obj)
    return None


def _dict_stepped(obj: Any) -> bool:
    """RLlib's shape without RLlib's base class: ``reset``/``step`` over dicts and a list of possible agents."""
    return callable(getattr(obj, "step", None)) and callable(getattr(obj, "reset", None)) and \
        isinstance(getattr(obj, "possible_agents", None), (list, tuple))
