"""Bring your own Q-network: the seed article's DQN module, trained by apexrl's Ape-X.

    python examples/custom_model.py            # trains CartPole-v1 until the greedy evaluation reaches 475
"""

from __future__ import annotations

import sys

import torch.nn.functional as F
from torch import nn

import apexrl


class DQN(nn.Module):
    """Any module mapping a batch of observations to Q-values [B, num_actions] works."""

    def __init__(self, obs_size: int, num_actions: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(obs_size, 128)
        self.fc2 = nn.Linear(128, 128)
        self.out = nn.Linear(128, num_actions)

    def forward(self, x):
        x = F.relu(self.fc1(x.float()))
        x = F.relu(self.fc2(x))
        return self.out(x)


def make_model(observation_space, action_space) -> nn.Module:
    return DQN(observation_space.shape[0], action_space.n)


def main(max_env_steps: int | None = None, run_dir: str | None = None):
    config = {  # the article's RLlib-style keys are accepted as they are
        "env": "CartPole-v1",
        "num_workers": 1,
        "lr": 1e-3,
        "train_batch_size": 64,
        "rollout_fragment_length": 50,
        "stop": {"target_return": 475, "max_env_steps": max_env_steps},
        "logging": {"console": "plain"},
    }
    result = apexrl.train(config, model_factory=make_model, run_dir=run_dir)
    print(f"{result.stop_reason}: best evaluation {result.best_eval_return}, run dir {result.run_dir}")
    return result


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else None)
