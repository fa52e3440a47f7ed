"""The Ape-X article's Tune program on apexrl: an ``ApeX`` agent per trial, its score reported to Tune.

    python examples/tune_function.py [num_episodes]

Changed from the article only where current Ray and gymnasium require it: ``tune.report`` takes a dict,
``tune.run`` is ``tune.Tuner(...).fit()``, ``reset()`` returns ``(obs, info)`` and ``step()`` returns
``terminated`` and ``truncated``.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only on one machine

import ray
import torch.nn.functional as F
from ray import tune
from torch import nn, optim

from apexrl import ApeX, create_env


class DQN(nn.Module):
    def __init__(self, obs_space, action_space):
        super().__init__()
        self.fc1 = nn.Linear(obs_space, 128)
        self.fc2 = nn.Linear(128, 128)
        self.out = nn.Linear(128, action_space)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.out(x)


def train_apex(config):
    env = create_env(config["env"])
    model = DQN(env.observation_space.shape[0], env.action_space.n)
    optimizer = optim.Adam(model.parameters(), lr=config["lr"])
    apex = ApeX(env, model, optimizer)

    for episode in range(config["num_episodes"]):
        state, _ = env.reset()
        done = truncated = False
        while not (done or truncated):
            action = apex.select_action(state)
            next_state, reward, done, truncated, _ = env.step(action)
            apex.store_experience(state, action, reward, next_state, done, truncated)
            apex.learn()
            state = next_state

        if episode % 10 == 0:
            tune.report({"score": apex.get_score()})


def main(num_episodes: int = 1000, storage_path: str | None = None):
    ray.init(address="local", include_dashboard=False)
    try:
        tuner = tune.Tuner(train_apex, param_space={"env": "CartPole-v0", "lr": 0.001, "num_episodes": num_episodes},
                           run_config=tune.RunConfig(storage_path=storage_path))
        results = tuner.fit()
        print(f"score: {results[0].metrics['score']}")
        return results
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
