"""What packing structured observations costs per env step: each env raw (gymnasium.make) against apexrl's
wrapped env (packed rows, masks), microseconds per step, medians of 5 blocks of 20,000 steps.

    python benchmarks/structured_step.py          # prints a stamped markdown table
"""

from __future__ import annotations

import datetime
import platform
import statistics
import subprocess
import timeit

import gymnasium as gym

from apexrl.envs import create_env

ENVS = ["FrozenLake-v1", "Taxi-v4", "Blackjack-v1", "apexrl.envs.maze:MaskedMaze-v0"]


def per_step_us(env: gym.Env, n: int = 20_000, blocks: int = 5) -> float:
    env.reset(seed=0)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(n)]  # illegal ones too: the maze then ends its episode
    it = iter(actions * (blocks + 1))

    def step() -> None:
        _, _, terminated, truncated, _ = env.step(next(it))
        if terminated or truncated:
            env.reset()

    return statistics.median(timeit.timeit(step, number=n) / n * 1e6 for _ in range(blocks))


def main() -> None:
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit} date {datetime.datetime.now().isoformat(timespec='seconds')} host {platform.node()}")
    print("command: python benchmarks/structured_step.py\n")
    print("| env | raw, us/step | wrapped, us/step | row bytes |")
    print("|---|---|---|---|")
    for env_id in ENVS:
        wrapped = create_env(env_id)
        raw = gym.make(env_id)
        print(f"| {env_id} | {per_step_us(raw):.1f} | {per_step_us(wrapped):.1f} | "
              f"{wrapped.observation_space.codec.row_bytes} |")


if __name__ == "__main__":
    main()
