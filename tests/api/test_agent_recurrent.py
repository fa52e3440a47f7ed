"""``apexrl.ApeX`` with a recurrent model is R2D2 in the user's loop: its state follows the episode, replay
holds sequences, and save/load resumes exactly (replay, the unfinished sequence, the model's state)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

import apexrl.envs.stateless  # noqa: F401  (registers CartPoleNoVel-v1)
from apexrl import ApeX
from apexrl.agents import get_builder
from apexrl.config import Config


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = Config().replace(**{"agent": "r2d2", "network.torso": [16], "network.head": 16, "r2d2.cell_size": 8})
    env = gym.make("CartPoleNoVel-v1")
    return get_builder("r2d2").make_network(cfg, env.observation_space, env.action_space)


def _apex(model):
    return ApeX(gym.make("CartPoleNoVel-v1"), model, torch.optim.Adam(model.parameters(), lr=1e-3),
                **{"r2d2.seq_len": 4, "r2d2.burn_in": 2, "learning_starts": 40, "batch_size": 4, "train_freq": 2})


def _play(apex, env, steps, state=None):
    if state is None:
        state, _ = env.reset(seed=0)
    for _ in range(steps):
        action = apex.select_action(state)
        nxt, reward, done, truncated, _ = env.step(action)
        apex.store_experience(state, action, reward, nxt, done, truncated)
        apex.learn()
        state = nxt if not (done or truncated) else env.reset()[0]
    return state


def test_the_models_state_follows_the_episode_and_replay_holds_sequences():
    model = _model()
    apex, env = _apex(model), gym.make("CartPoleNoVel-v1")
    state, _ = env.reset(seed=0)
    apex.select_action(state)
    assert apex.policy.state.abs().sum() > 0, "the state moved after one step"
    apex.reset()
    assert apex.policy.state.abs().sum() == 0, "reset() clears it"
    _play(apex, env, 300)
    batch, _, _ = apex.replay.sample(4, beta=0.4)
    assert batch["obs"].shape == (4, 7, 2) and batch["state"].shape == (4, 16)
    assert apex.learner.updates > 0 and len(apex.returns) > 0


def test_save_and_load_resume_exactly(tmp_path):
    apex, env = _apex(_model()), gym.make("CartPoleNoVel-v1")
    state = _play(apex, env, 150)
    apex.save(tmp_path / "a.pt")
    other = _model(1)
    twin = ApeX.load(tmp_path / "a.pt", gym.make("CartPoleNoVel-v1"), other, torch.optim.Adam(other.parameters()))
    assert torch.equal(twin.policy.state, apex.policy.state)
    a, b = apex.writer.state_dict(), twin.writer.state_dict()
    assert all(np.array_equal(a["steps"][k], b["steps"][k]) for k in a["steps"]) and np.array_equal(a["obs"], b["obs"])
    assert len(twin.replay) == len(apex.replay) and twin.learner.updates == apex.learner.updates
    # the same next steps give the same actions
    acts = []
    for agent in (apex, twin):
        agent.policy.exploration[:] = 0.0
        acts.append([agent.policy.act(np.asarray(state, np.float32)[None])[0] for _ in range(3)])
    assert acts[0] == acts[1]
