"""The recurrent peer of ``apexrl bench e2e``: sb3-contrib's RecurrentPPO with RL Zoo's settings (what an SB3
user picks for a partially observed task: SB3 has no recurrent off-policy agent)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apexrl.bench.e2e_common import Clock, Task, Tracker, learn_sb3

# RL Zoo (hyperparams/ppo_lstm.yml, CartPoleNoVel-v1), verbatim: n_envs 8, n_timesteps 1e5, policy
# MlpLstmPolicy, n_steps 32, batch_size 256, gae_lambda 0.8, gamma 0.98, n_epochs 20, ent_coef 0.0,
# learning_rate lin_0.001, clip_range lin_0.2 (lin_x: x times the fraction of n_timesteps left).
SB3_ZOO_CARTPOLE_NOVEL_PPO: dict[str, Any] = dict(
    n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
)
SB3_ZOO_PPO_LSTM_LR, SB3_ZOO_PPO_LSTM_CLIP, SB3_ZOO_PPO_LSTM_ENVS = 1e-3, 0.2, 8
SB3_ZOO_PPO_LSTM_TIMESTEPS = 100_000


def run_recurrent_ppo(task: Task, seed: int, budget: float, eval_interval: float) -> dict[str, Any]:
    """RecurrentPPO with RL Zoo's settings; its clock starts before its imports (apexrl's includes start-up)."""
    clock = Clock()
    import numpy as np
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    # One torch thread, as for SB3 DQN: a run of seed 0 with torch's default (both cores of this host) did
    # not reach 475 in 150 s, against 119 s with one (docs/benchmarks.md).
    torch.set_num_threads(1)
    tracker = Tracker(task.env_id, task.target, seed, eval_interval, budget, clock)

    def linear(x: float) -> Callable[[float], float]:
        return lambda progress_remaining: progress_remaining * x

    def greedy(model: Any) -> Callable[[Any], Any]:
        memory: dict[str, Any] = {"state": None, "start": True}  # one evaluation's episodes, a row each

        def act(obs: Any) -> Any:
            actions, memory["state"] = model.predict(obs, state=memory["state"], deterministic=True,
                                                     episode_start=np.full(len(obs), memory["start"]))
            memory["start"] = False
            return actions
        act.recurrent = True  # type: ignore[attr-defined]
        return act

    class _Cb(BaseCallback):
        def _on_step(self) -> bool:
            return not tracker.maybe_eval(self.num_timesteps, greedy(self.model))

    env = make_vec_env(task.env_id, n_envs=SB3_ZOO_PPO_LSTM_ENVS, seed=seed)
    settings = dict(SB3_ZOO_CARTPOLE_NOVEL_PPO)
    model = RecurrentPPO("MlpLstmPolicy", env, seed=seed, verbose=0, device="cpu", **settings,
                         learning_rate=linear(SB3_ZOO_PPO_LSTM_LR), clip_range=linear(SB3_ZOO_PPO_LSTM_CLIP))
    return learn_sb3(model, SB3_ZOO_PPO_LSTM_TIMESTEPS, tracker, clock, budget, _Cb(), {
        **{k: str(v) for k, v in settings.items()}, "n_envs": SB3_ZOO_PPO_LSTM_ENVS,
        "learning_rate": f"lin_{SB3_ZOO_PPO_LSTM_LR}", "clip_range": f"lin_{SB3_ZOO_PPO_LSTM_CLIP}",
        "n_timesteps": SB3_ZOO_PPO_LSTM_TIMESTEPS, "policy": "MlpLstmPolicy"})
