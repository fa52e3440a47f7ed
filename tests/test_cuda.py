"""`learner.device=cuda`: the same updates as on the CPU, run where a GPU exists (skipped elsewhere)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.agents import get_builder
from apexrl.config import Config

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this host")


def _learner(agent, device, obs, act, **over):
    cfg = Config().replace(**{"agent": agent, "learner.device": device, "learner.batch_size": 8, "seed": 0,
                              "network.torso": [16], "network.head": 16, **over})
    torch.manual_seed(0)
    return get_builder(agent).make_learner(cfg, obs, act)


def _batch(rng, B, act_dim=None):
    b = {"obs": rng.normal(size=(B, 4)).astype(np.float32), "reward": rng.normal(size=B).astype(np.float32),
         "discount": np.full(B, 0.97, np.float32), "next_obs": rng.normal(size=(B, 4)).astype(np.float32)}
    b["action"] = rng.integers(2, size=B) if act_dim is None else rng.uniform(-1, 1, (B, act_dim)).astype(np.float32)
    return b


@pytest.mark.parametrize("agent", ["dqn", "dpg"])
def test_cuda_learner_matches_the_cpu_learner(agent):
    obs = gym.spaces.Box(-1, 1, (4,), np.float32)
    act = gym.spaces.Discrete(2) if agent == "dqn" else gym.spaces.Box(-1, 1, (2,), np.float32)
    over = {} if agent == "dqn" else {"dpg.target_noise": 0.0}  # the devices' RNGs differ
    cpu, gpu = _learner(agent, "cpu", obs, act, **over), _learner(agent, "cuda", obs, act, **over)
    assert next(gpu.net.parameters()).is_cuda
    rng = np.random.default_rng(0)
    for _ in range(5):
        b = _batch(rng, 8, None if agent == "dqn" else 2)
        p_cpu, _ = cpu.update(b, np.ones(8, np.float32))
        p_gpu, _ = gpu.update(b, np.ones(8, np.float32))
        np.testing.assert_allclose(p_gpu, p_cpu, rtol=1e-3, atol=1e-4)  # priorities come back as numpy
