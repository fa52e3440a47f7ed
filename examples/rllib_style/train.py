"""The article's `train.py` on apexrl: the import changed, and `ray.init(address="auto")` runs only when
RAY_ADDRESS is set, so that the same script also runs on one machine.

    RAY_ADDRESS=auto python examples/rllib_style/train.py   # on a `ray start` cluster
    python examples/rllib_style/train.py [iterations]
"""

import os
import sys

import ray
from config import get_config

from apexrl import ApexTrainer

if __name__ == "__main__":
    if os.environ.get("RAY_ADDRESS"):  # without a cluster, the trainer starts a private loopback Ray
        ray.init(address="auto")  # Connect to the Ray cluster
    config = get_config()
    trainer = ApexTrainer(config=config)

    for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1000):
        result = trainer.train()
        print(f"Iteration: {i}, reward: {result['episode_reward_mean']}")
        if i % 10 == 0:
            checkpoint = trainer.save()
            print(f"Checkpoint saved at {checkpoint}")
    trainer.stop()
