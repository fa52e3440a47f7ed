"""Action masks: actors never take an illegal action, and the learner's target maximizes over legal ones."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from apexrl.agents.dqn.learner import DQNLearner
from apexrl.agents.dqn.policy import EpsilonGreedyPolicy
from apexrl.agents.encoders import MASKED_Q, MaskedQ
from apexrl.config import Config
from apexrl.envs import EnvSpecError, create_env
from apexrl.envs.spaces import ObservationCodec
from apexrl.envs.structured import NoLegalActionError

SPACE = gym.spaces.Dict({"s": gym.spaces.Discrete(4), "action_mask": gym.spaces.MultiBinary(3)})


class Table(nn.Module):
    """Q(s, .) from a table: the user's model, which receives the observation's structure."""

    def __init__(self, q):
        super().__init__()
        self.q = nn.Parameter(torch.tensor(q, dtype=torch.float32))

    def forward(self, obs):
        return self.q[obs["s"]]


def rows(states, masks):
    c = ObservationCodec(SPACE)
    return c, np.stack([c.pack({"s": s, "action_mask": np.array(m)}) for s, m in zip(states, masks)])


@pytest.mark.parametrize("epsilon", [1.0, 0.0])
def test_acting_never_draws_an_illegal_action(epsilon):
    rng = np.random.default_rng(0)
    masks = rng.integers(0, 2, size=(10, 3))
    masks[masks.sum(1) == 0, 2] = 1  # every state has a legal action
    codec, obs = rows([0, 1, 2, 3, 0, 1, 2, 3, 0, 1], masks)
    # the table prefers action 0 everywhere, which is illegal in some rows
    net = MaskedQ(codec, Table([[9.0, 1.0, 0.0]] * 4), structured_input=True)
    policy = EpsilonGreedyPolicy(net, 3, np.full(10, epsilon), seed=0, priority_eps=1e-6)
    taken = np.stack([policy.act(obs) for _ in range(1000)])  # 10,000 draws
    assert masks[np.arange(10), taken].all()
    if epsilon == 1.0:  # and exploration is uniform over the legal ones: each legal action seen
        for e in range(10):
            assert set(taken[:, e]) == set(np.flatnonzero(masks[e]))
    else:
        np.testing.assert_array_equal(taken[0], np.where(masks[:, 0] == 1, 0, np.where(masks[:, 1] == 1, 1, 2)))


def test_masked_double_dqn_target_by_hand():
    """Two transitions; the next states' legal actions exclude the best unmasked one.

    s'=1: Q = [1, 5, 2], mask [1, 0, 1] -> argmax over legal = action 2, Q = 2: y = 1 + 0.9 * 2 = 2.8
    s'=2: Q = [9, 3, 4], mask [0, 1, 1] -> action 2, Q = 4:                y = 0 + 0.5 * 4 = 2.0
    (unmasked they would be 1 + 0.9 * 5 = 5.5 and 0.5 * 9 = 4.5). Q(s=0, a=0) = 0 and Q(s=3, a=1) = 1, so
    the learner's new priorities are |y - Q(s, a)| + eps = 2.8 and 1.0 (target network = online at start).
    """
    table = [[0.0, 0.0, 0.0], [1.0, 5.0, 2.0], [9.0, 3.0, 4.0], [0.0, 1.0, 0.0]]
    codec, obs = rows([0, 3], [[1, 1, 1], [1, 1, 1]])
    _, nxt = rows([1, 2], [[1, 0, 1], [0, 1, 1]])
    cfg = Config().replace(**{"learner.lr": 1e-9, "replay.priority_eps": 1e-12})
    learner = DQNLearner(cfg, MaskedQ(codec, Table(table), structured_input=True))
    batch = {"obs": obs, "next_obs": nxt, "action": np.array([0, 1]), "reward": np.array([1.0, 0.0]),
             "discount": np.array([0.9, 0.5])}
    priorities, _ = learner.update(batch, np.ones(2, dtype=np.float32))
    np.testing.assert_allclose(priorities, [2.8, 1.0], rtol=1e-6)  # loss huber: |td| either way


def test_masked_q_values_and_a_terminal_state_with_no_legal_action():
    codec, obs = rows([1, 1], [[1, 0, 1], [0, 0, 0]])
    q = MaskedQ(codec, Table([[0.0] * 3, [1.0, 5.0, 2.0], [0.0] * 3, [0.0] * 3]), True)(torch.as_tensor(obs))
    assert q[0].tolist() == [1.0, MASKED_Q, 2.0]
    assert (q[1] * 0.0).abs().max() == 0  # a terminal's discount of 0 cancels it: no NaN in targets


def test_taxi_mask_comes_from_info_and_maze_mask_from_the_observation():
    taxi = create_env("Taxi-v4", seed=0)
    assert taxi.observation_space.codec.mask_source == "info"
    obs, info = taxi.reset(seed=0)
    np.testing.assert_array_equal(taxi.observation_space.codec.legal(obs[None])[0], info["action_mask"] == 1)
    maze = create_env("apexrl.envs.maze:MaskedMaze-v0", seed=0)
    assert maze.observation_space.codec.mask_source == "observation"
    assert "action_mask" not in [x.name for x in maze.observation_space.codec.inputs], "not fed to the network"
    none = create_env({"id": "Taxi-v4", "action_mask": "none"}, seed=0)
    assert none.observation_space.codec.mask_leaf is None


def test_a_mask_with_no_legal_action_in_a_running_episode_is_one_line():
    from apexrl.envs.maze import MaskedMaze

    class Stuck(MaskedMaze):
        def _obs(self):
            obs = super()._obs()
            obs["action_mask"] = obs["action_mask"] * (self.t < 1)
            return obs

    env = create_env(Stuck, seed=0)
    obs, _ = env.reset(seed=0)
    legal = int(env.observation_space.codec.legal(obs[None])[0].argmax())
    with pytest.raises(NoLegalActionError, match="env '<.*Stuck>' gave an action mask with no legal action at step 1"):
        env.step(legal)


def test_masks_on_a_continuous_action_env_are_refused():
    from apexrl.envs.maze import MaskedMaze

    class Continuous(MaskedMaze):
        def __init__(self, env_config=None):
            super().__init__(env_config)
            self.action_space = gym.spaces.Box(-1, 1, (2,))

    with pytest.raises(EnvSpecError, match="masks need Discrete actions"):
        create_env(Continuous)


def test_the_maze_counts_an_illegal_action_in_its_log(tmp_path):
    """What the Ray tests' 'no illegal action' rests on: the env itself records one when it is taken."""
    from apexrl.envs.maze import MaskedMaze

    log = tmp_path / "illegal.txt"
    env = MaskedMaze({"illegal_log": str(log)})
    obs, _ = env.reset(seed=0)
    illegal = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    _, reward, terminated, _, _ = env.step(illegal)
    assert env.illegal_actions == 1 and reward == -1.0 and terminated
    assert len(log.read_text().splitlines()) == 1
