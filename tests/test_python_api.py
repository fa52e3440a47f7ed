"""The Python API trains a user's own torch module (the README's example)."""

import importlib.util
from pathlib import Path

import pytest
import torch

from apexrl import checkpoint as ckpt

pytestmark = pytest.mark.timeout(300)


def test_custom_model_example_trains_and_checkpoints_the_users_module(tmp_path):
    path = Path(__file__).resolve().parent.parent / "examples" / "custom_model.py"
    spec = importlib.util.spec_from_file_location("custom_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    result = mod.main(max_env_steps=2_000, run_dir=str(tmp_path / "run"))
    assert result.env_steps >= 2_000
    _, state = ckpt.load_latest(tmp_path / "run")
    assert set(state["learner"]["net"]) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "out.weight", "out.bias"}
    assert isinstance(state["learner"]["net"]["fc1.weight"], torch.Tensor)


def test_apex_takes_a_discrete_observation_env_and_a_model_on_state_ids():
    """A raw gymnasium env with Discrete observations: ApeX packs its states, the model receives the ids."""
    import gymnasium as gym
    import torch
    from torch import nn

    from apexrl import ApeX

    env = gym.make("FrozenLake-v1", is_slippery=False)
    torch.manual_seed(0)
    model = nn.Embedding(16, 4)  # Q(s, .) looked up by state id: only ids can index it
    apex = ApeX(env, model, torch.optim.Adam(model.parameters(), lr=1e-2), learning_starts=200,
                epsilon_decay_steps=2000, batch_size=32, train_freq=1, seed=0)
    s, _ = env.reset(seed=0)
    for _ in range(4000):
        a = apex.select_action(s)
        s2, r, te, tr, _ = env.step(a)
        apex.store_experience(s, a, r, s2, te, tr)
        apex.learn()
        s = s2 if not (te or tr) else env.reset()[0]
    s, _ = env.reset(seed=0)
    for _ in range(6):  # the shortest path to the goal is 6 moves
        s, r, te, tr, _ = env.step(apex.select_action(s, explore=False))
    assert r == 1.0 and te
