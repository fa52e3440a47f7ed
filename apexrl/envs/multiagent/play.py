"""Playing whole multi-agent games with fixed policies: greedy evaluations against an opponent.

A shared policy in a game with action masks (tic-tac-toe, Connect Four) is evaluated seat by seat against an
opponent (``opponents.py``: a uniform random legal player by default, a saved snapshot, or your function):
``episodes`` games with the policy in each seat, a win / draw / loss by the sign of its seat's return. Without
masks (cooperative tasks such as MPE's simple_spread) every agent plays with the policy and an episode's return
is the mean of its agents'. Games run side by side, one batched forward
pass per step for every copy whose policy seat is to move.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from apexrl.agents.base import Policy
from apexrl.config import Config
from apexrl.envs.multiagent.make import AgentView, agent_views, make_game
from apexrl.envs.multiagent.opponents import Opponent, as_env_action, make_opponent, policy_for


def evaluate_game(make_policy: Callable[[int], Policy], cfg: Config, episodes: int, seed: int = 0,
                  max_steps: int = 100_000) -> dict[str, Any]:
    """``episodes`` greedy games per seat (or in all, without an opponent), by the policy ``make_policy(rows)``
    makes for batches of up to ``rows`` observations; returns ``eval_returns`` (the policy's return per game)
    and, against an opponent, ``eval_seats``: win / draw / loss rates per seat."""
    probe = make_game(cfg.env)
    try:
        views = agent_views(probe, cfg.env, probe.reset(seed=seed).to_act)
        seats = list(probe.possible_agents)
    finally:
        probe.close()
    made = make_policy(episodes * len(seats))
    policy = policy_for(made)
    opponent = make_opponent(cfg, views, episodes * len(seats))
    illegal = [0]
    if opponent is None:
        paid: list[dict[Any, float]] = []
        returns = _play(policy, None, cfg, views, episodes, seed, None, max_steps, illegal, paid)
        out = {"eval_returns": returns, "eval_illegal": illegal[0]}
        if isinstance(made, dict):  # several policies: each one's mean return over the agents it plays
            mapping = cfg.multiagent.policy_mapping or {}
            out["eval_policies"] = {
                pid: float(np.mean([p.get(a, 0.0) for p in paid for a in seats if mapping.get(str(a)) == pid]))
                for pid in dict.fromkeys(mapping.values())}
        return out
    out: dict[str, Any] = {"eval_returns": [], "eval_seats": {}}
    for k, seat in enumerate(seats):
        returns = _play(policy, opponent, cfg, views, episodes, seed + 10_007 * k, seat, max_steps, illegal)
        r = np.sign(returns)
        out["eval_seats"][str(seat)] = {"win": float(np.mean(r > 0)), "draw": float(np.mean(r == 0)),
                                        "loss": float(np.mean(r < 0))}
        out["eval_returns"] += returns
    out["eval_illegal"] = illegal[0]
    return out


def _play(policy: Callable[[Any], Policy], opponent: Opponent | None, cfg: Config, views: dict[Any, AgentView], episodes: int,
          seed: int, seat: Any, max_steps: int, illegal: list[int], paid_out: list[dict[Any, float]] | None = None
          ) -> list[float]:
    """Returns of the policy's seat per game (``seat`` None: the mean over all agents); the policy's moves
    its mask did not allow are added to ``illegal[0]`` (they are played: the env decides what they cost)."""
    games = [make_game(cfg.env) for _ in range(episodes)]
    rng = np.random.default_rng(seed)
    seat_of = {a: k for k, a in enumerate(views)}
    for a in views:  # new games: a recurrent policy's memory starts empty
        policy(a).reset_slots(np.ones(episodes * len(views), dtype=bool))
    try:
        turns = [g.reset(seed=seed + i) for i, g in enumerate(games)]
        paid: list[dict[Any, float]] = [{} for _ in games]
        for _ in range(max_steps):
            live = [i for i, t in enumerate(turns) if not t.over]
            if not live:
                break
            rows = [{a: views[a].row(o, info) for a, (o, info) in turns[i].to_act.items()} for i in live]
            mine = [(j, a) for j, r in enumerate(rows) for a in r if seat is None or a == seat]
            acts: dict[tuple[int, Any], Any] = {}
            groups: dict[int, list[tuple[int, Any]]] = {}
            for m in mine:  # the seats each policy plays (one group with one policy)
                groups.setdefault(id(policy(m[1])), []).append(m)
            for group in groups.values():
                obs = np.stack([rows[j][a] for j, a in group])
                slots = np.array([live[j] * len(views) + seat_of[a] for j, a in group], dtype=np.int64)
                chosen = policy(group[0][1]).act(obs, None, slots)  # each game's seat its own slot
                acts.update({m: as_env_action(c) for m, c in zip(group, chosen)})
                view = views[group[0][1]]
                if view.masked:
                    illegal[0] += int((~view.codec.legal(obs)[np.arange(len(obs)), chosen.astype(np.int64)]).sum())
            others = {(j, a): r for j, r_j in enumerate(rows) for a, r in r_j.items() if (j, a) not in acts}
            if others:  # the opponent's seats in every live game, one call (a snapshot: one forward pass)
                acts.update(opponent.act({(j, a): turns[live[j]].to_act[a] for j, a in others}, others, rng))
            for j, i in enumerate(live):
                turns[i] = games[i].step({a: acts[(j, a)] for a in rows[j]})
                for a, r in turns[i].rewards.items():
                    paid[i][a] = paid[i].get(a, 0.0) + r
        if paid_out is not None:
            paid_out += paid
        if seat is None:
            return [float(np.mean(list(p.values()))) if p else 0.0 for p in paid]
        return [float(p.get(seat, 0.0)) for p in paid]
    finally:
        for g in games:
            g.close()
