"""The Ape-X actor for multi-agent envs: ``envs_per_actor`` copies of a game, every agent of every copy an
env slot of one shared policy, each with its own exploration (Ape-X's spread over slots).

An agent's transition runs from its observation to its next one: in a turn-based game the next time it must
act, with every reward it was paid in between (the opponent's moves included: the loser's -1 arrives at the
winner's move), terminal at its own end. Those one-step transitions go into the n-step builder slot by slot
(``NStepBuilder.step(slots=...)``), so n-step returns are per agent. The policy acts only for the slots to
move, in one batch over all copies. Same interface as :class:`~apexrl.runtime.actor.Actor`: the actor loop,
the Ray shell and the in-process runner do not know which one they drive.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from apexrl.agents.base import AgentBuilder, ModelFactory
from apexrl.config import Config
from apexrl.core import ReplaySink, WeightSource
from apexrl.envs.multiagent.games import GameError, Turn
from apexrl.envs.multiagent.make import agent_views, make_game, shared_spaces
from apexrl.envs.multiagent.opponents import as_env_action
from apexrl.runtime.actor import ActorBase, actor_seed


class MultiAgentActor(ActorBase):
    def __init__(self, cfg: Config, builder: AgentBuilder, actor_index: int, num_actors: int, sink: ReplaySink,
                 weights: WeightSource | None = None, model_factory: ModelFactory | None = None,
                 env_factory: Any = None) -> None:
        self.cfg, self.index = cfg, actor_index
        self._start_sending(sink, weights)
        self.E = E = cfg.actors.envs_per_actor
        self.seed = actor_seed(cfg.seed, actor_index)
        self.games = [make_game(cfg.env) for _ in range(E)]
        self._resets = 0
        turns = [self._reset(c) for c in range(E)]
        self.views = agent_views(self.games[0], cfg.env, turns[0].to_act)
        obs_space, act_space = shared_spaces(self.views, cfg.env.id)
        self.agents = list(self.views)
        self.seat = {a: k for k, a in enumerate(self.agents)}
        self.A = len(self.agents)
        S = E * self.A
        net = builder.make_acting_network(cfg, obs_space, act_space, model_factory, self.seed)
        self.policy = builder.make_actor_policy(cfg, net, act_space, actor_index, num_actors, S, self.seed)
        self.writer = builder.make_writer(cfg, self.policy, S)
        self.rows = np.zeros((S, *obs_space.shape), dtype=obs_space.dtype)  # each slot's newest observation
        self._pend_obs = np.zeros_like(self.rows)  # the observation a slot last acted on...
        self._pend_act: np.ndarray | None = None  # ...its action (allocated at the first act)
        self._open = np.zeros(S, dtype=bool)  # ...while its transition is not complete
        self._paid = np.zeros(S)  # reward since the slot's last action
        self._ret = np.zeros(S)  # the slot's return this episode
        self._moves = np.zeros(S, dtype=np.int64)
        self._ended = np.zeros(S, dtype=bool)  # the agent's episode ended, its game goes on
        self._to_act: list[list[int]] = [[] for _ in range(E)]  # slots to move, per copy
        self.env_steps = self.episodes = 0
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.levels: list[float] = []
        for c, turn in enumerate(turns):
            self._take(c, turn, [])

    def _reset(self, c: int) -> Turn:
        self._resets += 1
        return self.games[c].reset(seed=self.seed + 7919 * self._resets + c)

    def _slot(self, c: int, agent: Any) -> int:
        k = self.seat.get(agent)
        if k is None:
            raise GameError(f"env '{self.cfg.env.id}' has agent '{agent}', not one of its possible_agents "
                            f"{self.agents}")
        return c * self.A + k

    # ------------------------------------------------------------------ one game step's consequences
    def _take(self, c: int, turn: Turn, done: list[tuple[Any, ...]]) -> None:
        """Book ``turn`` of copy ``c``: pay, end and complete transitions (into ``done``), and note who moves
        next."""
        for agent, r in turn.rewards.items():
            s = self._slot(c, agent)
            self._paid[s] += r
            self._ret[s] += r
        for agent, (obs, info, term, trunc) in turn.ended.items():
            s = self._slot(c, agent)
            if self._open[s]:
                final = self.views[agent].row(obs, info, goes_on=False) if obs is not None else self._pend_obs[s]
                self._completed(done, s, final, term, trunc)
            self._finish(s)
        slots = []
        for agent, (obs, info) in turn.to_act.items():
            s = self._slot(c, agent)
            if self._ended[s]:
                raise GameError(f"env '{self.cfg.env.id}' asked agent '{agent}' to act after its episode ended")
            self.rows[s] = self.views[agent].row(obs, info)
            if self._open[s]:
                self._completed(done, s, self.rows[s].copy(), False, False)
            slots.append(s)
        if turn.over:
            base = c * self.A
            for s in range(base, base + self.A):  # left without an end of their own: cut off, bootstrap
                if self._open[s]:
                    self._completed(done, s, self._pend_obs[s], False, True)
                if self._open[s] or self._moves[s]:
                    self._finish(s)
            self._ended[base:base + self.A] = False
            self._take(c, self._reset(c), done)
            return
        self._to_act[c] = slots

    def _completed(self, done: list[tuple[Any, ...]], s: int, next_obs: np.ndarray, term: bool, trunc: bool) -> None:
        done.append((s, self._pend_obs[s].copy(), self._pend_act[s].copy(), self._paid[s], next_obs, term, trunc))
        self._open[s] = False
        self._paid[s] = 0.0

    def _finish(self, s: int) -> None:
        """The slot's episode is over: its statistics, and nothing pending."""
        if self._moves[s]:
            self.returns.append(float(self._ret[s]))
            self.lengths.append(int(self._moves[s]))
            self.levels.append(float(self.policy.exploration[s]))
            self.episodes += 1
        self._ret[s] = self._moves[s] = 0
        self._ended[s] = True

    # ------------------------------------------------------------------ the loop
    def run(self, num_steps: int, global_env_steps: int | None = None) -> dict[str, Any]:
        """Step every game copy ``num_steps`` times (one move of a turn-based game, one joint step of a
        parallel one); return stats in :meth:`Actor.run`'s shape."""
        t0, started_at = time.perf_counter(), time.time()
        if global_env_steps is not None:
            self.policy.observe_global_steps(global_env_steps)
        self.returns, self.lengths, self.levels = [], [], []
        for _ in range(num_steps):
            slots = np.fromiter((s for c in range(self.E) for s in self._to_act[c]), dtype=np.int64)
            actions = self.policy.act(self.rows[slots], None, slots)
            if self._pend_act is None:
                self._pend_act = np.zeros((len(self.rows), *actions.shape[1:]), dtype=actions.dtype)
            self._pend_obs[slots] = self.rows[slots]
            self._pend_act[slots] = actions
            self._open[slots] = True
            self._moves[slots] += 1
            done: list[tuple[Any, ...]] = []
            k = 0
            for c in range(self.E):
                mine = self._to_act[c]
                acts = {self.agents[s - c * self.A]: as_env_action(actions[k + j]) for j, s in enumerate(mine)}
                k += len(mine)
                self._take(c, self.games[c].step(acts), done)
            if done:
                self._complete(done)
            self.env_steps += self.E
            self._stepped(self.E)
        return {
            "actor": self.index, "env_steps": num_steps * self.E, "total_env_steps": self.env_steps,
            "episode_returns": self.returns, "episode_lengths": self.lengths, "episode_exploration": self.levels,
            "exploration": self.policy.exploration.tolist(), "exploration_name": self.policy.exploration_name,
            "weights_version": self.weights_version, "transitions_sent": self.transitions_sent,
            "frames_sent": 0, "nonfinite_priorities": self.nonfinite_priorities, "nonfinite_steps": 0,
            "nonfinite_dropped": 0, "time_s": time.perf_counter() - t0, "started_at": started_at,
        }

    def _complete(self, done: list[tuple[Any, ...]]) -> None:
        """One n-step builder step over every slot whose transition completed (a slot at most once)."""
        slots, obs, act, paid, nxt, term, trunc = zip(*done)
        out = self.writer.step(np.stack(obs), np.stack(act), np.array(paid), np.stack(nxt), np.array(term),
                               np.array(trunc), slots=np.array(slots, dtype=np.int64))
        if out is not None:
            self._queue(out)

    def close(self) -> None:
        self._flush()
        for g in self.games:
            g.close()
