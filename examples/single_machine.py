"""The Ape-X article's single-machine program on apexrl: your own network, optimizer and episode loop.

    python examples/single_machine.py

Changed from the article only where current gymnasium requires it: ``reset()`` returns ``(obs, info)`` and
``step()`` returns ``terminated`` and ``truncated`` (a time limit, after which the agent bootstraps).
"""

from __future__ import annotations

import sys

import gymnasium as gym
import torch
import torch.nn.functional as F
from torch import nn, optim

from apexrl import ApeX


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


def main(episodes: int = 1000, target: float | None = 195.0, seed: int = 0) -> float:
    torch.manual_seed(seed)  # the network's initial weights: one seed, one run
    env = gym.make("CartPole-v0")
    obs_space = env.observation_space.shape[0]
    action_space = env.action_space.n
    model = DQN(obs_space, action_space)
    optimizer = optim.Adam(model.parameters(), lr=0.001)
    apex = ApeX(env, model, optimizer, seed=seed)

    env.reset(seed=seed)
    for episode in range(episodes):
        state, _ = env.reset()
        done = truncated = False
        while not (done or truncated):
            action = apex.select_action(state)
            next_state, reward, done, truncated, _ = env.step(action)
            apex.store_experience(state, action, reward, next_state, done, truncated)
            apex.learn()
            state = next_state
        if episode % 10 == 0:
            print(f"Episode {episode}, Score: {apex.get_score()}")
            if target is not None and len(apex.returns) == 100 and apex.get_score() >= target:
                break
    return apex.get_score()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
