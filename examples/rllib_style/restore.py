"""Continue the article's training from a checkpoint that `train.py` saved, in a fresh trainer: act with
the restored policy, then train on from the saved step count.

    RAY_ADDRESS=auto python examples/rllib_style/restore.py CHECKPOINT_DIR [iterations]
"""

import os
import sys

import numpy as np
import ray
from config import get_config

from apexrl import ApexTrainer

if __name__ == "__main__":
    if os.environ.get("RAY_ADDRESS"):
        ray.init(address="auto")
    trainer = ApexTrainer(config=get_config())
    trainer.restore(sys.argv[1])
    obs = np.zeros(trainer.system.observation_space.shape, np.float32)
    print(f"Restored at {trainer.loop.progress.env_steps} env steps; action for a zero observation: "
          f"{trainer.compute_single_action(obs)}")
    for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
        result = trainer.train()
        print(f"Iteration: {i}, reward: {result['episode_reward_mean']}, timesteps: {result['timesteps_total']}")
    trainer.stop()
