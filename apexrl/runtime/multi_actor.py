"""The Ape-X actor for multi-agent envs: ``envs_per_actor`` copies of a game, every agent of every copy an
env slot of the policy that plays it (one shared policy, or one per ``multiagent`` policy), each slot with its
own exploration (Ape-X's spread over a policy's slots).

An agent's transition runs from its observation to its next one: in a turn-based game the next time it must
act, with every reward it was paid in between (the opponent's moves included: the loser's -1 arrives at the
winner's move), terminal at its own end. Those one-step transitions go into their policy's n-step builder
slot by slot (``NStepBuilder.step(slots=...)``), so n-step returns are per agent, and from there to that
policy's shards. Each policy acts only for its slots to move, in one batch over all copies. Same interface
as :class:`~apexrl.runtime.actor.Actor`: the actor loop, the Ray shell and the in-process runner do not know
which one they drive.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from apexrl.core import ReplaySink, WeightSource
from apexrl.envs.multiagent.games import GameError, Turn
from apexrl.envs.multiagent.make import agent_views, make_game
from apexrl.envs.multiagent.opponents import as_env_action, random_action
from apexrl.runtime.actor import ActorBase, actor_seed, pull
from apexrl.runtime.league import RANDOM, SELF, League

if TYPE_CHECKING:
    from apexrl.runtime.assembly import System


class Lane(ActorBase):
    """One policy's share of an actor: the global slots it plays, its policy, n-step builder and sends
    (``sink`` None: a policy that is not trained, whose transitions go nowhere)."""

    def __init__(self, member: System, slots: np.ndarray, sink: ReplaySink | None, index: int, seed: int) -> None:
        self.cfg, self.slots = member.cfg, slots
        self._start_sending(sink, None)  # type: ignore[arg-type]
        S = len(slots)
        obs_space = member.observation_space
        net = member.builder.make_acting_network(member.cfg, obs_space, member.action_space, member.model_factory,
                                                 seed)
        self.policy = member.builder.make_actor_policy(member.cfg, net, member.action_space, index,
                                                       member.num_actors, S, seed)
        self.writer = member.builder.make_writer(member.cfg, self.policy, S) if sink is not None else None
        self.rows = np.zeros((S, *obs_space.shape), dtype=obs_space.dtype)  # each slot's newest observation
        self.pend_obs = np.zeros_like(self.rows)  # the observation a slot last acted on...
        self.pend_act: np.ndarray | None = None  # ...and its action (allocated at the first act)
        self.done: list[tuple[Any, ...]] = []

    def act(self, local: np.ndarray) -> np.ndarray:
        actions = self.policy.act(self.rows[local], None, local)
        if self.pend_act is None:
            self.pend_act = np.zeros((len(self.rows), *actions.shape[1:]), dtype=actions.dtype)
        self.pend_obs[local] = self.rows[local]
        self.pend_act[local] = actions
        return actions

    def complete(self) -> None:
        """One n-step builder step over every slot whose transition completed (a slot at most once)."""
        done, self.done = self.done, []
        if self.writer is None or not done:
            return
        slots, obs, act, paid, nxt, term, trunc = zip(*done)
        out = self.writer.step(np.stack(obs), np.stack(act), np.array(paid), np.stack(nxt), np.array(term),
                               np.array(trunc), slots=np.array(slots, dtype=np.int64))
        if out is not None:
            self._queue(out)


class MultiAgentActor:
    def __init__(self, system: System, actor_index: int, sink: ReplaySink, weights: WeightSource | None = None
                 ) -> None:
        cfg = system.cfg
        self.cfg, self.index, self.weights = cfg, actor_index, weights
        self.E = E = cfg.actors.envs_per_actor
        self.seed = actor_seed(cfg.seed, actor_index)
        self.games = [make_game(cfg.env) for _ in range(E)]
        self._resets = 0
        turns = [self._reset(c) for c in range(E)]
        self.views = agent_views(self.games[0], cfg.env, turns[0].to_act)
        self.agents = list(self.views)
        self.seat = {a: k for k, a in enumerate(self.agents)}
        self.A = A = len(self.agents)
        S = E * A
        mapping = cfg.multiagent.policy_mapping or {}
        members = system.policies or (system,)
        trained = [m.cfg.multiagent.policy_id for m in system.trained] if system.policies else None
        self.lane_of = np.zeros(S, dtype=np.int64)  # global slot -> its lane, and its index there
        self.local = np.zeros(S, dtype=np.int64)
        self.lanes: list[Lane] = []
        for j, m in enumerate(members):
            pid = m.cfg.multiagent.policy_id
            seats = [k for k, a in enumerate(self.agents) if mapping.get(str(a), pid) == pid or len(members) == 1]
            slots = np.array([c * A + k for c in range(E) for k in seats], dtype=np.int64)
            if trained is None:
                lane_sink: ReplaySink | None = sink
            else:
                lane_sink = sink.group(trained.index(pid)) if pid in trained else None  # type: ignore[attr-defined]
            self.lanes.append(Lane(m, slots, lane_sink, actor_index, self.seed + 104_729 * j))
            self.lane_of[slots], self.local[slots] = j, np.arange(len(slots))
        self.multi = bool(system.policies)
        self.policy = _Policies(self)
        sp = cfg.multiagent.self_play
        self.league = None if sp.p_latest >= 1.0 else League(
            sp.p_latest, sp.p_random, sp.snapshot_every, sp.pool_size,
            lambda: system.make_eval_policy(system.make_acting_network(self.seed), S, self.seed, explore=0.0),
            np.random.default_rng(self.seed + 31))
        self._foe = np.full(E, SELF, dtype=np.int64)  # each copy's opponent this game (league.py)
        self._is_foe = np.zeros(S, dtype=bool)  # a seat the opponent plays: no transitions, no statistics
        self._open = np.zeros(S, dtype=bool)  # a slot's transition is not complete
        self._paid = np.zeros(S)  # reward since the slot's last action
        self._ret = np.zeros(S)  # the slot's return this episode
        self._moves = np.zeros(S, dtype=np.int64)
        self._ended = np.zeros(S, dtype=bool)  # the agent's episode ended, its game goes on
        self._to_act: list[list[int]] = [[] for _ in range(E)]  # slots to move, per copy
        self.env_steps = self.episodes = 0
        self._since_sync = 0
        self.weights_version = -1
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.levels: list[float] = []
        for c, turn in enumerate(turns):
            self._draw(c)
            self._take(c, turn)

    @property
    def transitions_sent(self) -> int:
        return sum(lane.transitions_sent for lane in self.lanes)

    @property
    def nonfinite_priorities(self) -> int:
        return sum(lane.nonfinite_priorities for lane in self.lanes)

    def _reset(self, c: int) -> Turn:
        self._resets += 1
        return self.games[c].reset(seed=self.seed + 7919 * self._resets + c)

    def _draw(self, c: int) -> None:
        """Copy ``c``'s opponent for its new game; against a snapshot or random, one seat is the learner's."""
        if self.league is None:
            return
        base = c * self.A
        self._foe[c] = foe = self.league.draw()
        self._is_foe[base:base + self.A] = foe != SELF
        if foe != SELF:
            self._is_foe[base + int(self.league.rng.integers(self.A))] = False
        if foe >= 0:  # a snapshot's own memory of this game starts empty
            mask = np.zeros(len(self._is_foe), dtype=bool)
            mask[base:base + self.A] = True
            self.league.pool[foe].reset_slots(mask)

    def _slot(self, c: int, agent: Any) -> int:
        k = self.seat.get(agent)
        if k is None:
            raise GameError(f"env '{self.cfg.env.id}' has agent '{agent}', not one of its possible_agents "
                            f"{self.agents}")
        return c * self.A + k

    def _lane(self, s: int) -> tuple[Lane, int]:
        return self.lanes[self.lane_of[s]], int(self.local[s])

    # ------------------------------------------------------------------ one game step's consequences
    def _take(self, c: int, turn: Turn) -> None:
        """Book ``turn`` of copy ``c``: pay, end and complete transitions, and note who moves next."""
        for agent, r in turn.rewards.items():
            s = self._slot(c, agent)
            self._paid[s] += r
            self._ret[s] += r
        for agent, (obs, info, term, trunc) in turn.ended.items():
            s = self._slot(c, agent)
            if self._open[s]:
                lane, i = self._lane(s)
                final = self.views[agent].row(obs, info, goes_on=False) if obs is not None else lane.pend_obs[i]
                self._completed(s, final, term, trunc)
            self._finish(s)
        slots = []
        for agent, (obs, info) in turn.to_act.items():
            s = self._slot(c, agent)
            if self._ended[s]:
                raise GameError(f"env '{self.cfg.env.id}' asked agent '{agent}' to act after its episode ended")
            lane, i = self._lane(s)
            lane.rows[i] = self.views[agent].row(obs, info)
            if self._open[s]:
                self._completed(s, lane.rows[i].copy(), False, False)
            slots.append(s)
        if turn.over:
            base = c * self.A
            for s in range(base, base + self.A):  # left without an end of their own: cut off, bootstrap
                if self._open[s]:
                    lane, i = self._lane(s)
                    self._completed(s, lane.pend_obs[i], False, True)
                if self._open[s] or self._moves[s]:
                    self._finish(s)
            self._ended[base:base + self.A] = False
            turn = self._reset(c)
            self._draw(c)
            self._take(c, turn)
            return
        self._to_act[c] = slots

    def _completed(self, s: int, next_obs: np.ndarray, term: bool, trunc: bool) -> None:
        lane, i = self._lane(s)
        lane.done.append((i, lane.pend_obs[i].copy(), lane.pend_act[i].copy(), self._paid[s], next_obs, term, trunc))
        self._open[s] = False
        self._paid[s] = 0.0

    def _finish(self, s: int) -> None:
        """The slot's episode is over: its statistics, and nothing pending."""
        lane, i = self._lane(s)
        if self._moves[s]:
            self.returns.append(float(self._ret[s]))
            self.lengths.append(int(self._moves[s]))
            self.levels.append(float(lane.policy.exploration[i]))
            self.episodes += 1
        self._ret[s] = self._moves[s] = 0
        self._ended[s] = True
        mask = np.zeros(len(lane.rows), dtype=bool)
        mask[i] = True
        lane.policy.reset_slots(mask)  # a recurrent policy's memory, a DPG slot's noise

    # ------------------------------------------------------------------ the loop
    def run(self, num_steps: int, global_env_steps: int | None = None) -> dict[str, Any]:
        """Step every game copy ``num_steps`` times (one move of a turn-based game, one joint step of a
        parallel one); return stats in :meth:`Actor.run`'s shape."""
        t0, started_at = time.perf_counter(), time.time()
        if global_env_steps is not None:
            self.policy.observe_global_steps(global_env_steps)
        self.returns, self.lengths, self.levels = [], [], []
        chosen: list[Any] = [None] * len(self.lane_of)
        for _ in range(num_steps):
            slots = np.fromiter((s for c in range(self.E) for s in self._to_act[c]), dtype=np.int64)
            if self.league is not None:
                foes = self._is_foe[slots]
                if foes.any():
                    self._foes_act(slots[foes], chosen)
                    slots = slots[~foes]
            lanes = self.lane_of[slots]
            for j, lane in enumerate(self.lanes):
                mine = slots[lanes == j] if len(self.lanes) > 1 else slots
                if len(mine):
                    for s, a in zip(mine.tolist(), lane.act(self.local[mine])):
                        chosen[s] = a
            self._open[slots] = True
            self._moves[slots] += 1
            for c in range(self.E):
                acts = {self.agents[s - c * self.A]: as_env_action(chosen[s]) for s in self._to_act[c]}
                self._take(c, self.games[c].step(acts))
            for lane in self.lanes:
                lane.complete()
                lane._stepped(self.E)
            self.env_steps += self.E
            self._since_sync += self.E
            if self._since_sync >= self.cfg.actors.weight_sync_period:
                self._since_sync = 0
                self._sync()
        return {
            "actor": self.index, "env_steps": num_steps * self.E, "total_env_steps": self.env_steps,
            "episode_returns": self.returns, "episode_lengths": self.lengths, "episode_exploration": self.levels,
            "exploration": self.policy.exploration.tolist(), "exploration_name": self.policy.exploration_name,
            "weights_version": self.weights_version, "transitions_sent": self.transitions_sent,
            "frames_sent": 0, "nonfinite_priorities": self.nonfinite_priorities, "nonfinite_steps": 0,
            "nonfinite_dropped": 0, "time_s": time.perf_counter() - t0, "started_at": started_at,
        }

    def _foes_act(self, slots: np.ndarray, chosen: list[Any]) -> None:
        """The opponents' moves: a random legal one, or a snapshot's greedy one (one batch per snapshot)."""
        lane = self.lanes[0]  # a league plays one shared policy
        by_foe: dict[int, list[int]] = {}
        for s in slots.tolist():
            by_foe.setdefault(int(self._foe[s // self.A]), []).append(s)
        for foe, mine in by_foe.items():
            if foe == RANDOM:
                for s in mine:
                    chosen[s] = random_action(self.views[self.agents[s % self.A]], lane.rows[self.local[s]],
                                              self.league.rng)  # type: ignore[union-attr]
            else:
                acts = self.league.pool[foe].act(lane.rows[self.local[mine]], None,  # type: ignore[union-attr]
                                                 np.array(mine, dtype=np.int64))
                for s, a in zip(mine, acts):
                    chosen[s] = a

    def _sync(self) -> None:
        pull(self.weights, self.set_weights)

    def set_weights(self, weights: dict[str, np.ndarray], version: int) -> None:
        """The run's weights: one policy's, or every policy's under ``<policy id>/`` names."""
        if not self.multi:
            self.lanes[0].policy.set_weights(weights)
            if self.league is not None:
                self.league.offer(weights, version)
        else:
            from apexrl.runtime.policy_set import split

            parts = split(weights)
            for lane in self.lanes:
                lane.policy.set_weights(parts[lane.cfg.multiagent.policy_id])
        self.weights_version = version

    def close(self) -> None:
        for lane in self.lanes:
            if lane.sink is not None:
                lane._flush()
        for g in self.games:
            g.close()


class _Policies:
    """What the actor loop asks of an actor's policy, over every lane: exploration per slot (in slot order) and
    the global step count that anneals it."""

    def __init__(self, actor: MultiAgentActor) -> None:
        self.actor = actor
        self.exploration_name = actor.lanes[0].policy.exploration_name

    def observe_global_steps(self, steps: int) -> None:
        for lane in self.actor.lanes:
            lane.policy.observe_global_steps(steps)

    @property
    def exploration(self) -> np.ndarray:
        a = self.actor
        out = np.zeros(len(a.lane_of))
        for lane in a.lanes:
            out[lane.slots] = lane.policy.exploration
        return out
