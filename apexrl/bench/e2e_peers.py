"""The peers of ``apexrl bench e2e``, each run in a child process: apexrl (``apexrl train``'s code path),
Stable-Baselines3 DQN with RL Zoo's settings, RLlib DQN; and the evaluation they all share."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGET = 475.0
EVAL_EPISODES = 10

# RL Zoo (DLR-RM/rl-baselines3-zoo, hyperparams/dqn.yml, CartPole-v1, tuned), verbatim except n_timesteps,
# which the budget replaces:  policy MlpPolicy, learning_rate 2.3e-3, batch_size 64, buffer_size 100000,
# learning_starts 1000, gamma 0.99, target_update_interval 10, train_freq 256, gradient_steps 128,
# exploration_fraction 0.16, exploration_final_eps 0.04, policy_kwargs dict(net_arch=[256, 256]),
# n_timesteps 5e4 (exploration_fraction is a fraction of it, so total_timesteps stays 5e4 for the schedule).
SB3_ZOO_CARTPOLE: dict[str, Any] = dict(
    learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
    target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
    exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256]),
)
SB3_ZOO_TIMESTEPS = 50_000


# ------------------------------------------------------------------------------------------ shared pieces
class _Clock:
    """Wall clock of one run minus the time spent in the benchmark's own evaluations (in-loop peers)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.excluded = 0.0

    def now(self) -> float:
        return time.perf_counter() - self.t0 - self.excluded


class _GreedyPolicy:
    """Adapts a peer's ``fn(obs_tensor) -> q_values`` to the policy ``evaluate`` plays with: greedy, as
    apexrl's evaluation policy with ``evaluation.epsilon`` 0."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def act(self, obs: Any, keys: Any = None) -> Any:
        import torch

        return self.fn(torch.as_tensor(obs)).argmax(dim=1).numpy()


def _greedy_eval(q_fn: Callable[[Any], Any], env_id: str, seed: int, round_: int) -> float:
    import numpy as np

    from apexrl.config import EnvConfig
    from apexrl.evaluation import evaluate

    returns = evaluate(_GreedyPolicy(q_fn),  # type: ignore[arg-type]
                        EnvConfig(id=env_id), EVAL_EPISODES, seed=seed * 7 + 1_000_000 + round_)
    return float(np.mean(returns))


class _Tracker:
    """Evaluates every ``interval`` seconds of (benchmark-excluded) wall time; records first success."""

    def __init__(self, env_id: str, seed: int, interval: float, budget: float, clock: _Clock) -> None:
        self.env_id, self.seed, self.interval, self.budget, self.clock = env_id, seed, interval, budget, clock
        self.next_eval = interval
        self.rounds = 0
        self.evals: list[tuple[float, int, float]] = []
        self.time_to_target: float | None = None
        self.steps_to_target: int | None = None

    def maybe_eval(self, env_steps: int, q_fn: Callable[[Any], Any]) -> bool:
        """Return True when training should stop (target reached or budget spent)."""
        t = self.clock.now()
        if t >= self.next_eval:
            t_eval = time.perf_counter()
            self.rounds += 1
            mean = _greedy_eval(q_fn, self.env_id, self.seed, self.rounds)
            self.clock.excluded += time.perf_counter() - t_eval
            self.evals.append((round(t, 2), env_steps, mean))
            self.next_eval = t + self.interval
            if mean >= TARGET and self.time_to_target is None:
                self.time_to_target, self.steps_to_target = t, env_steps
                return True
        return t >= self.budget


# ------------------------------------------------------------------------------------------ peers (children)
def run_apexrl(env_id: str, seed: int, budget: float, eval_interval: float, overrides: list[str]) -> dict[str, Any]:
    from apexrl.config import load
    from apexrl.runtime.driver import train

    cfg = load("cartpole", [f"env.id={env_id}", f"seed={seed}", f"stop.target_return={TARGET}",
                            f"stop.max_time_s={budget}", f"evaluation.episodes={EVAL_EPISODES}",
                            "logging.console=plain", "logging.tensorboard=false", "checkpoint.every_reports=0",
                            *([f"evaluation.interval_s={eval_interval}"] if eval_interval > 0 else []),
                            *overrides])
    from apexrl.metrics import Console

    class _StartClock(Console):
        """Notes when the driver's clock started (first report time minus its time_s): the start-up before
        it (Ray, worker processes) counts; the drain, checkpoint and shutdown after the target do not."""

        t_start: float | None = None

        def update(self, record: dict[str, Any]) -> None:
            if self.t_start is None:
                self.t_start = time.perf_counter() - float(record["time_s"])
            super().update(record)

    run_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"apexrl-e2e-{os.getpid()}"
    console = _StartClock("plain")
    t0 = time.perf_counter()
    res = train(cfg, run_dir=run_dir, console=console)
    startup = max(0.0, (console.t_start or t0) - t0)
    reached = res.time_to_target_s is not None
    return {
        "reached": reached,
        "time_to_target_s": (res.time_to_target_s + startup) if reached else None,
        "env_steps_to_target": res.env_steps_to_target,
        "env_steps": res.env_steps, "updates": res.learner_updates, "train_time_s": res.time_s,
        "startup_s": round(startup, 2),
        "env_steps_per_s": res.env_steps / max(res.time_s, 1e-9),
        "updates_per_s": res.learner_updates / max(res.time_s, 1e-9),
        "config": {"overrides": overrides, "eval_interval_s": cfg.evaluation.interval_s},
    }


def run_sb3(env_id: str, seed: int, budget: float, eval_interval: float, overrides: list[str]) -> dict[str, Any]:
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)
    clock = _Clock()
    tracker = _Tracker(env_id, seed, eval_interval, budget, clock)

    class _Cb(BaseCallback):
        def _on_step(self) -> bool:
            q_net = self.model.q_net  # type: ignore[attr-defined]
            return not tracker.maybe_eval(self.num_timesteps, lambda obs: q_net(obs))

    model = DQN("MlpPolicy", gym.make(env_id), seed=seed, verbose=0, device="cpu", **SB3_ZOO_CARTPOLE)
    cb = _Cb()
    steps = 0
    while tracker.time_to_target is None and clock.now() < budget:
        # learn() in slices so the run can go past the Zoo's 5e4 steps within the budget (schedule kept).
        model.learn(total_timesteps=SB3_ZOO_TIMESTEPS if steps == 0 else 10_000, callback=cb,
                    reset_num_timesteps=steps == 0)
        if model.num_timesteps == steps:
            break
        steps = model.num_timesteps
    t = clock.now()
    updates = int(model._n_updates)
    return {
        "reached": tracker.time_to_target is not None,
        "time_to_target_s": tracker.time_to_target, "env_steps_to_target": tracker.steps_to_target,
        "env_steps": int(model.num_timesteps), "updates": updates, "train_time_s": t,
        "env_steps_per_s": model.num_timesteps / max(t, 1e-9), "updates_per_s": updates / max(t, 1e-9),
        "evals": tracker.evals, "config": {k: str(v) for k, v in SB3_ZOO_CARTPOLE.items()},
    }


def run_rllib(env_id: str, seed: int, budget: float, eval_interval: float, overrides: list[str]) -> dict[str, Any]:
    """RLlib 2.60 DQN on the new API stack (RLModule + Learner + EnvRunner + ConnectorV2), RLlib's defaults
    except the settings below. Its default training intensity samples ``n_step`` (3) env steps per training
    step and makes one learner update of ``train_batch_size_per_learner`` (32) replayed transitions."""
    import gymnasium
    import ray
    import torch
    from ray.rllib.algorithms.dqn import DQNConfig

    from apexrl.config import load
    from apexrl.runtime.assembly import auto_num_actors

    clock = _Clock()  # started before Ray and the algorithm are built: time includes start-up, as for apexrl
    torch.set_num_threads(1)  # the local learner runs in this process; as for SB3
    apex_cfg = load("cartpole", [f"env.id={env_id}", *overrides])
    runners = auto_num_actors(apex_cfg, float(os.cpu_count() or 1))
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray.init(address="local", num_cpus=max(2, os.cpu_count() or 1), include_dashboard=False,
             log_to_driver=False)
    # DQN's default iteration is >= 1000 sampled env steps (tens of seconds here); a train() call of ~1 s
    # lets the benchmark evaluate on its own schedule. Reporting cadence only: no learning setting changes.
    iteration_s = max(0.1, min(1.0, eval_interval)) if eval_interval > 0 else 1.0
    try:
        config = (
            DQNConfig()
            .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
            .environment(env_id)
            .env_runners(num_env_runners=runners)
            .training(double_q=True, dueling=True, n_step=3,
                      replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer", "capacity": 100_000,
                                            "alpha": 0.6, "beta": 0.4})
            .reporting(min_time_s_per_iteration=iteration_s, min_sample_timesteps_per_iteration=0)
            .debugging(seed=seed)
        )
        algo = config.build_algo()
        startup = clock.now()
        # As for apexrl: time to target includes start-up, the budget and the rates count training time only.
        tracker = _Tracker(env_id, seed, eval_interval, budget + startup, clock)
        batch = int(config.train_batch_size_per_learner)
        env_steps = updates = 0
        while True:
            result = algo.train()
            env_steps = int(_dig(result, ("env_runners", "num_env_steps_sampled_lifetime"),
                                 ("num_env_steps_sampled_lifetime",)) or env_steps)
            # The learner counts transitions trained on; DQN's learner trains each update on exactly one
            # batch of train_batch_size_per_learner (one epoch, no minibatches), so updates = that / batch.
            trained = _dig(result, ("learners", "__all_modules__", "num_module_steps_trained_lifetime"),
                           ("learners", "default_policy", "num_module_steps_trained_lifetime"))
            updates = int(round(float(trained) / batch)) if trained is not None else updates
            # The local EnvRunner's module: the learner's weights are synced to it after every update.
            module = algo.get_module()

            def q_fn(obs: Any, module: Any = module) -> Any:
                with torch.no_grad():
                    return module.compute_q_values({"obs": obs})["qf_preds"]

            if tracker.maybe_eval(env_steps, q_fn):
                break
        t = clock.now() - startup
        algo.stop()
    finally:
        ray.shutdown()
    return {
        "reached": tracker.time_to_target is not None,
        "time_to_target_s": tracker.time_to_target, "env_steps_to_target": tracker.steps_to_target,
        "env_steps": env_steps, "updates": updates, "train_time_s": t, "startup_s": round(startup, 2),
        "env_steps_per_s": env_steps / max(t, 1e-9), "updates_per_s": updates / max(t, 1e-9),
        "evals": tracker.evals,
        "config": {"num_env_runners": runners, "n_step": 3, "double_q": True, "dueling": True,
                   "replay": "PrioritizedEpisodeReplayBuffer(capacity=100000, alpha=0.6, beta=0.4)",
                   "training_intensity": config.training_intensity,
                   "rollout_fragment_length": config.get_rollout_fragment_length(),
                   "train_batch_size_per_learner": batch, "min_time_s_per_iteration": iteration_s,
                   "versions": {"ray": ray.__version__, "gymnasium": gymnasium.__version__,
                                "torch": torch.__version__, "python": sys.version.split()[0]}},
    }


def _dig(d: dict[str, Any], *paths: tuple[str, ...]) -> Any:
    for path in paths:
        node: Any = d
        for k in path:
            node = node.get(k) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


PEERS: dict[str, tuple[str, Callable[..., dict[str, Any]]]] = {
    "apexrl": ("apexrl", run_apexrl),
    "sb3": ("stable_baselines3", run_sb3),
    "rllib": ("ray.rllib.algorithms.dqn", run_rllib),
}
