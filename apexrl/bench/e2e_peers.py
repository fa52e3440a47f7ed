"""The peers of ``apexrl bench e2e``, each run in a child process: apexrl (``apexrl train``'s code path),
Stable-Baselines3 (DQN or TD3, with RL Zoo's settings for the task; RecurrentPPO in ``e2e_recurrent``;
sb3-contrib's QR-DQN on CartPole), RLlib DQN. The tasks, clock and shared evaluation are in ``e2e_common``."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apexrl.bench.e2e_common import EVAL_EPISODES, TASKS, Clock, Task, Tracker, argmax_q, learn_sb3
from apexrl.bench.e2e_recurrent import run_recurrent_ppo

__all__ = ["EVAL_EPISODES", "PEERS", "TASKS", "Task"]

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
# RL Zoo (hyperparams/qrdqn.yml, CartPole-v1, tuned): the DQN settings above, verbatim, with
# policy_kwargs dict(net_arch=[256, 256], n_quantiles=10); n_timesteps 5e4.
SB3_ZOO_CARTPOLE_QRDQN: dict[str, Any] = dict(SB3_ZOO_CARTPOLE, policy_kwargs=dict(net_arch=[256, 256], n_quantiles=10))

# RL Zoo (hyperparams/td3.yml, Pendulum-v1), verbatim except n_timesteps (the budget replaces it): policy
# MlpPolicy, gamma 0.98, buffer_size 200000, learning_starts 10000, noise_type normal, noise_std 0.1,
# gradient_steps -1, train_freq [1, "episode"], learning_rate 1e-3, policy_kwargs dict(net_arch=[400, 300]),
# n_timesteps 2e4. SB3's TD3 defaults supply the rest (batch 256, tau 0.005, policy_delay 2, target noise 0.2).
SB3_ZOO_PENDULUM_TD3: dict[str, Any] = dict(
    gamma=0.98, buffer_size=200_000, learning_starts=10_000, gradient_steps=-1, train_freq=(1, "episode"),
    learning_rate=1e-3, policy_kwargs=dict(net_arch=[400, 300]),
)
SB3_ZOO_TD3_NOISE_STD = 0.1
# RL Zoo td3.yml, LunarLanderContinuous: the Pendulum settings above (n_timesteps 3e5). MuJoCo (HalfCheetah):
# learning_starts 10000, noise normal 0.1, train_freq 1, gradient_steps 1, learning_rate 1e-3, batch 256,
# net_arch [400, 300], n_timesteps 1e6.
SB3_ZOO_MUJOCO_TD3: dict[str, Any] = dict(
    learning_starts=10_000, train_freq=1, gradient_steps=1, learning_rate=1e-3, batch_size=256,
    policy_kwargs=dict(net_arch=[400, 300]),
)

# The MinAtar paper's DQN (Young & Tian, 2019, sec. 4): batch 32, replay 100k, replay start 5000, target
# copy every 1000 updates, one update per step, gamma 0.99, epsilon 1 -> 0.1 over the first 100k steps
# (exploration_fraction of its 5M-frame budget), lr 2.5e-4 (the paper's RMSProp; SB3's default Adam here),
# its network: one 3x3 conv with 16 channels and a 128-unit layer (no dueling in the paper).
SB3_MINATAR_DQN: dict[str, Any] = dict(
    learning_rate=2.5e-4, batch_size=32, buffer_size=100_000, learning_starts=5000, gamma=0.99,
    target_update_interval=1000, train_freq=1, gradient_steps=1, exploration_fraction=0.02,
    exploration_initial_eps=1.0, exploration_final_eps=0.1,
)
SB3_MINATAR_TIMESTEPS = 5_000_000
SB3_ZOO_TD3_TIMESTEPS = 20_000


# ------------------------------------------------------------------------------------------ peers (children)
def run_apexrl(task: Task, seed: int, budget: float, eval_interval: float, overrides: list[str]) -> dict[str, Any]:
    from apexrl.config import load
    from apexrl.runtime.driver import train

    cfg = load(task.preset, [f"env.id={task.env_id}", f"seed={seed}", f"stop.target_return={task.target}",
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
    t0, started_at = time.perf_counter(), time.time()
    res = train(cfg, run_dir=run_dir, console=console)
    startup = max(0.0, (console.t_start or t0) - t0)
    reached = res.time_to_target_s is not None
    import json

    with open(run_dir / "metrics.jsonl") as f:  # the curve, on the same clock as the other peers' evals
        evals = [(round(r["time_s"] + startup, 2), r["env_steps"], r["eval_return_mean"])
                 for r in map(json.loads, filter(str.strip, f)) if r.get("eval_return_mean") is not None]
    return {
        "evals": evals,
        "reached": reached,
        "replay_20": _replay_best(run_dir, seed) if reached else None,
        "time_to_target_s": (res.time_to_target_s + startup) if reached else None,
        "clock_started_at": started_at,
        "env_steps_to_target": res.env_steps_to_target,
        "env_steps": res.env_steps, "updates": res.learner_updates, "train_time_s": res.time_s,
        "startup_s": round(startup, 2),
        "env_steps_per_s": res.env_steps / max(res.time_s, 1e-9),
        "updates_per_s": res.learner_updates / max(res.time_s, 1e-9),
        "config": {"overrides": overrides, "eval_interval_s": cfg.evaluation.interval_s},
    }


def _replay_best(run_dir: Path, seed: int) -> float:
    """What ``apexrl eval RUN --episodes 20`` plays: the run's best.pt on 20 fresh episodes (after the clock)."""
    import numpy as np

    from apexrl import checkpoint as ckpt
    from apexrl.config import from_dict
    from apexrl.evaluation import evaluate_system
    from apexrl.runtime.assembly import assemble

    _, state = ckpt.resolve(run_dir, best=True)
    system = assemble(from_dict(state["config"]), num_actors=1)
    net, weights = system.loaded_network(state["learner"]["net"])
    return float(np.mean(evaluate_system(system, net, weights, 20, 777_000 + seed)["eval_returns"]))


def run_sb3(task: Task, seed: int, budget: float, eval_interval: float, overrides: list[str]) -> dict[str, Any]:
    """SB3 DQN (CartPole settings) for ``dqn`` tasks, TD3 (Pendulum settings) for ``dpg`` tasks,
    sb3-contrib's RecurrentPPO (RL Zoo's CartPoleNoVel-v1 settings) for ``r2d2`` tasks."""
    if task.agent == "r2d2":
        return run_recurrent_ppo(task, seed, budget, eval_interval)
    import numpy as np
    import torch
    from stable_baselines3 import DQN, TD3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.noise import NormalActionNoise

    env_id = task.env_id
    if task.agent == "dqn":
        torch.set_num_threads(1)
    # TD3 keeps torch's default threads (every core of this host for its one process): its 400x300
    # networks gain from them, and SB3 should not be handicapped against apexrl's two processes.
    clock = Clock()
    tracker = Tracker(env_id, task.target, seed, eval_interval, budget, clock)

    unpacked: Callable[[Any], Any] = lambda q: q

    class _Cb(BaseCallback):
        def _on_step(self) -> bool:
            if task.agent == "dqn":
                act = argmax_q(unpacked(self.model.q_net))  # type: ignore[attr-defined]
            else:
                def act(obs: Any, model: Any = self.model) -> Any:
                    return model.predict(obs, deterministic=True)[0]
            return not tracker.maybe_eval(self.num_timesteps, act)

    from apexrl.config import EnvConfig
    from apexrl.envs import make_env

    env = make_env(EnvConfig(id=env_id))  # the same env (and, for MinAtar, layout) apexrl evaluates on
    codec = getattr(env.observation_space, "codec", None)
    if codec is not None:  # a structured observation: SB3 takes the env's own space (one-hot for Discrete)
        env = env.env
        unpacked = _unpacked(codec)
    if task.preset == "minatar":
        settings: dict[str, Any] = dict(SB3_MINATAR_DQN)
        model: Any = DQN("CnnPolicy", env, seed=seed, verbose=0, device="cpu", **settings,
                         policy_kwargs=dict(features_extractor_class=_minatar_extractor(),
                                            features_extractor_kwargs={}, net_arch=[128], normalize_images=False))
        first = SB3_MINATAR_TIMESTEPS
    elif task.agent == "dqn":
        settings = dict(SB3_ZOO_CARTPOLE)
        model = DQN("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **settings)
        first = SB3_ZOO_TIMESTEPS
    else:
        n = int(np.prod(env.action_space.shape))  # type: ignore[arg-type]
        noise = NormalActionNoise(np.zeros(n), SB3_ZOO_TD3_NOISE_STD * np.ones(n))
        zoo = SB3_ZOO_MUJOCO_TD3 if task.preset == "halfcheetah" else SB3_ZOO_PENDULUM_TD3
        settings = {**zoo, "noise_std": SB3_ZOO_TD3_NOISE_STD, "torch_threads": torch.get_num_threads()}
        model = TD3("MlpPolicy", env, seed=seed, verbose=0, device="cpu", action_noise=noise, **zoo)
        first = SB3_ZOO_TD3_TIMESTEPS
    return learn_sb3(model, first, tracker, clock, budget, _Cb(), {k: str(v) for k, v in settings.items()})


def run_qrdqn(task: Task, seed: int, budget: float, eval_interval: float, overrides: list[str]) -> dict[str, Any]:
    """sb3-contrib's QR-DQN with RL Zoo's CartPole-v1 settings (the peer of ``network.distribution=quantile``)."""
    if task.preset != "cartpole":
        raise ValueError(f"the qrdqn peer has RL Zoo's settings for CartPole-v1 only, not {task.env_id}")
    import torch
    from sb3_contrib import QRDQN
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)
    clock = Clock()
    tracker = Tracker(task.env_id, task.target, seed, eval_interval, budget, clock)

    class _Cb(BaseCallback):
        def _on_step(self) -> bool:
            def act(obs: Any, model: Any = self.model) -> Any:
                return model.predict(obs, deterministic=True)[0]
            return not tracker.maybe_eval(self.num_timesteps, act)

    from apexrl.config import EnvConfig
    from apexrl.envs import make_env

    settings = dict(SB3_ZOO_CARTPOLE_QRDQN)
    model = QRDQN("MlpPolicy", make_env(EnvConfig(id=task.env_id)), seed=seed, verbose=0, device="cpu", **settings)
    return learn_sb3(model, SB3_ZOO_TIMESTEPS, tracker, clock, budget, _Cb(), {k: str(v) for k, v in settings.items()})


def _unpacked(codec: Any) -> Callable[[Any], Callable[[Any], Any]]:
    """``q_fn`` of the env's own observations -> ``q_fn`` of apexrl's packed rows (the shared evaluation
    plays apexrl's env; SB3 sees the env's own observations, which it one-hot encodes itself)."""
    def wrap(q_fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        import torch

        return lambda rows: q_fn(torch.as_tensor(codec.unpack(rows.numpy())))
    return wrap


def _minatar_extractor() -> Any:
    """SB3 features extractor: MinAtar's one 3x3 conv with 16 channels on [C, 10, 10] 0/1 grids."""
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class MinAtarConv(BaseFeaturesExtractor):  # type: ignore[misc]
        def __init__(self, observation_space: Any) -> None:
            c, h, w = observation_space.shape
            super().__init__(observation_space, features_dim=16 * (h - 2) * (w - 2))
            self.net = torch.nn.Sequential(torch.nn.Conv2d(c, 16, 3), torch.nn.ReLU(), torch.nn.Flatten())

        def forward(self, obs: Any) -> Any:
            return self.net(obs.float())

    return MinAtarConv


def run_rllib(task: Task, seed: int, budget: float, eval_interval: float, overrides: list[str]) -> dict[str, Any]:
    """RLlib 2.60 DQN on the new API stack (RLModule + Learner + EnvRunner + ConnectorV2), RLlib's defaults
    except the settings below. Its default training intensity samples ``n_step`` (3) env steps per training
    step and makes one learner update of ``train_batch_size_per_learner`` (32) replayed transitions."""
    import gymnasium
    import ray
    import torch
    from ray.rllib.algorithms.dqn import DQNConfig

    from apexrl.config import load
    from apexrl.runtime.assembly import auto_num_actors

    clock = Clock()  # started before Ray and the algorithm are built: time includes start-up, as for apexrl
    torch.set_num_threads(1)  # the local learner runs in this process; as for SB3
    if task.agent != "dqn":
        raise ValueError("the rllib peer runs DQN only (RLlib removed its Ape-X DDPG)")
    env_id = task.env_id
    apex_cfg = load(task.preset, [f"env.id={env_id}", *overrides])
    runners = auto_num_actors(apex_cfg, float(os.cpu_count() or 1))
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # RLlib's own Ray: loopback on a shared host
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
        tracker = Tracker(env_id, task.target, seed, eval_interval, budget + startup, clock)
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
                return module.compute_q_values({"obs": obs})["qf_preds"]

            if tracker.maybe_eval(env_steps, argmax_q(q_fn)):
                break
        t = clock.now() - startup
        algo.stop()
    finally:
        ray.shutdown()
    return {
        "reached": tracker.time_to_target is not None,
        "time_to_target_s": tracker.time_to_target, "env_steps_to_target": tracker.steps_to_target,
        "clock_started_at": clock.started_at,
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
    "sb3": ("stable_baselines3", run_sb3),  # r2d2 tasks also need sb3_contrib (the bench extra has both)
    "rllib": ("ray.rllib.algorithms.dqn", run_rllib),
    "qrdqn": ("sb3_contrib", run_qrdqn),  # CartPole only: RL Zoo's qrdqn.yml
}
