"""What every peer of ``apexrl bench e2e`` shares: the tasks, the clock that leaves the benchmark's own
evaluations out, and the greedy evaluation every peer is judged by (apexrl's own ``evaluate``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EVAL_EPISODES = 10


@dataclass(frozen=True)
class Task:
    """A benchmark task: the apexrl preset, its env and the greedy-evaluation mean that counts as solved."""

    preset: str
    env_id: str
    target: float
    agent: str  # which SB3 peer: dqn -> DQN, dpg -> TD3, r2d2 -> sb3-contrib's RecurrentPPO


TASKS: dict[str, Task] = {
    "cartpole": Task("cartpole", "CartPole-v1", 475.0, "dqn"),
    "pendulum": Task("pendulum", "Pendulum-v1", -200.0, "dpg"),
    "minatar": Task("minatar", "MinAtar/Breakout-v1", 10.0, "dqn"),
    "lunarlander-continuous": Task("lunarlander-continuous", "LunarLanderContinuous-v3", 200.0, "dpg"),
    "halfcheetah": Task("halfcheetah", "HalfCheetah-v5", 5000.0, "dpg"),
    "taxi": Task("taxi", "Taxi-v4", 7.0, "dqn"),  # Discrete(500) observations; actions masked via info
    "cartpole-novel": Task("cartpole-novel", "apexrl.envs.stateless:CartPoleNoVel-v1", 475.0, "r2d2"),
}


# ------------------------------------------------------------------------------------------ shared pieces
class Clock:
    """Wall clock of one run minus the time spent in the benchmark's own evaluations (in-loop peers)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.started_at = time.time()  # wall clock of t0: ``--from-launch`` adds the process's time before it
        self.excluded = 0.0

    def now(self) -> float:
        return time.perf_counter() - self.t0 - self.excluded


class GreedyPolicy:
    """Adapts a peer's ``act(obs_batch) -> actions`` (greedy: argmax Q, or a deterministic policy without
    noise) to the policy ``evaluate`` plays with, as apexrl's evaluation policy with ``evaluation.epsilon`` 0."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.recurrent = getattr(fn, "recurrent", False)  # acts on every episode's row at every step

    def act(self, obs: Any, keys: Any = None) -> Any:
        return self.fn(obs)


def argmax_q(q_fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Greedy actions of a ``q_fn(obs_tensor) -> Q-values``."""
    def act(obs: Any) -> Any:
        import torch

        with torch.no_grad():
            return q_fn(torch.as_tensor(obs)).argmax(dim=1).numpy()
    return act


def _greedy_eval(act_fn: Callable[[Any], Any], env_id: str, seed: int, round_: int) -> float:
    import numpy as np

    from apexrl.config import EnvConfig
    from apexrl.evaluation import evaluate

    returns = evaluate(GreedyPolicy(act_fn),  # type: ignore[arg-type]
                        EnvConfig(id=env_id), EVAL_EPISODES, seed=seed * 7 + 1_000_000 + round_)
    return float(np.mean(returns))


class Tracker:
    """Evaluates every ``interval`` seconds of (benchmark-excluded) wall time; records first success."""

    def __init__(self, env_id: str, target: float, seed: int, interval: float, budget: float, clock: Clock) -> None:
        self.env_id, self.target, self.seed, self.interval, self.budget = env_id, target, seed, interval, budget
        self.clock = clock
        self.next_eval = interval
        self.rounds = 0
        self.evals: list[tuple[float, int, float]] = []
        self.time_to_target: float | None = None
        self.steps_to_target: int | None = None

    def maybe_eval(self, env_steps: int, act_fn: Callable[[Any], Any]) -> bool:
        """Return True when training should stop (target reached or budget spent)."""
        t = self.clock.now()
        if t >= self.next_eval:
            t_eval = time.perf_counter()
            self.rounds += 1
            mean = _greedy_eval(act_fn, self.env_id, self.seed, self.rounds)
            self.clock.excluded += time.perf_counter() - t_eval
            self.evals.append((round(t, 2), env_steps, mean))
            self.next_eval = t + self.interval
            if mean >= self.target and self.time_to_target is None:
                self.time_to_target, self.steps_to_target = t, env_steps
                return True
        return t >= self.budget


def learn_sb3(model: Any, first: int, tracker: Tracker, clock: Clock, budget: float, callback: Any,
              config: dict[str, Any]) -> dict[str, Any]:
    """An SB3 model's ``learn()`` in slices (the Zoo's ``first`` timesteps with its schedules, then 10k more at
    a time) until the target or the budget; the peer's result."""
    steps = 0
    while tracker.time_to_target is None and clock.now() < budget:
        model.learn(total_timesteps=first if steps == 0 else 10_000, callback=callback,
                    reset_num_timesteps=steps == 0)
        if model.num_timesteps == steps:
            break
        steps = model.num_timesteps
    t = clock.now()
    updates = int(model._n_updates)
    return {
        "reached": tracker.time_to_target is not None,
        "time_to_target_s": tracker.time_to_target, "env_steps_to_target": tracker.steps_to_target,
        "clock_started_at": clock.started_at,
        "env_steps": int(model.num_timesteps), "updates": updates, "train_time_s": t,
        "env_steps_per_s": model.num_timesteps / max(t, 1e-9), "updates_per_s": updates / max(t, 1e-9),
        "evals": tracker.evals, "config": config,
    }
