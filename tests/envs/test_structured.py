"""Structured observations: what each gymnasium space becomes in a packed row and in the network's input,
and that replay carries it unchanged."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.agents.dqn.networks import build_network
from apexrl.agents.encoders import StructuredEncoder, leaf_tensor, unpack
from apexrl.config import NetworkConfig
from apexrl.envs import EnvSpecError, create_env
from apexrl.envs.spaces import ObservationCodec, PackedSpace
from apexrl.replay.nstep import NStepBuilder
from apexrl.replay.prioritized import PrioritizedReplay

NESTED = gym.spaces.Dict({
    "pos": gym.spaces.Discrete(3, start=-1),
    "cells": gym.spaces.MultiDiscrete([2, 4]),
    "flags": gym.spaces.MultiBinary(3),
    "img": gym.spaces.Box(0, 255, (5, 5, 2), np.uint8),
    "deep": gym.spaces.Tuple((gym.spaces.Box(-1.0, 1.0, (2,), np.float64), gym.spaces.Discrete(300))),
})
OBS = {"pos": 0, "cells": np.array([1, 3]), "flags": np.array([1, 0, 1], np.int8),
       "img": np.arange(50, dtype=np.uint8).reshape(5, 5, 2),
       "deep": (np.array([0.5, -0.25]), 299)}


def test_layout_keeps_each_leaf_in_its_own_dtype_aligned():
    c = ObservationCodec(NESTED)
    # gymnasium's Dict orders keys: cells, deep, flags, img, pos
    got = [(x.name, x.kind, x.shape, x.dtype.name, x.offset) for x in c.leaves]
    assert got == [("cells", "multi_discrete", (2,), "uint8", 0),
                   ("deep.0", "box", (2,), "float64", 8),      # 2 bytes used, aligned up to 8
                   ("deep.1", "discrete", (), "int16", 24),    # 300 values do not fit a uint8
                   ("flags", "multi_binary", (3,), "uint8", 26),
                   ("img", "box", (5, 5, 2), "uint8", 29),
                   ("pos", "discrete", (), "uint8", 79)]
    assert c.row_bytes == 80


def test_pack_then_unpack_gives_back_values_order_and_dtypes():
    c = ObservationCodec(NESTED)
    rows = np.stack([c.pack(OBS), c.pack({**OBS, "pos": 1, "deep": (np.zeros(2), 7)})])
    out = c.unpack(rows)
    assert out["pos"].tolist() == [0, 1] and out["deep"][1].tolist() == [299, 7]
    np.testing.assert_array_equal(out["cells"][0], [1, 3])
    np.testing.assert_array_equal(out["flags"][0], [1, 0, 1])
    np.testing.assert_array_equal(out["img"][0], OBS["img"])
    assert out["img"].dtype == np.uint8 and out["deep"][0].dtype == np.float64
    np.testing.assert_array_equal(out["deep"][0][0], [0.5, -0.25])
    # what a user's model receives: the same structure as tensors, discrete values with their start
    t = unpack(c, torch.as_tensor(rows))
    assert t["pos"].tolist() == [0, 1] and t["deep"][1].tolist() == [299, 7]
    assert t["img"].dtype == torch.uint8 and t["deep"][0].dtype == torch.float64


def test_encoder_one_hots_discrete_leaves_and_flattens_the_rest():
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(3, start=-1), "b": gym.spaces.Box(-5, 5, (2,), np.float32),
                             "c": gym.spaces.MultiDiscrete([2, 3])})
    c = ObservationCodec(space)
    row = c.pack({"a": 1, "b": np.array([0.5, -2.0], np.float32), "c": np.array([1, 0])})
    features = StructuredEncoder(c)(torch.as_tensor(row[None]))
    #                    a = 1 -> index 2 of 3   b            c: 1 of 2, 0 of 3
    assert features.tolist() == [[0, 0, 1, 0.5, -2.0, 0, 1, 1, 0, 0]]


@pytest.mark.parametrize("shape, channels_last, out", [((7, 7, 3), True, 32 * 3 * 3), ((3, 7, 7), False, 32 * 3 * 3),
                                                       ((84, 84, 4), True, 3136), ((5, 5, 2), True, 32 * 1 * 1)])
def test_image_leaves_get_a_conv_stack_sized_to_the_image(shape, channels_last, out):
    space = gym.spaces.Dict({"img": gym.spaces.Box(0, 255, shape, np.uint8)})
    enc = StructuredEncoder(ObservationCodec(space))
    image = enc.images["0"]
    assert image.channels_last == channels_last and enc.out_features == out
    x = torch.zeros(2, ObservationCodec(space).row_bytes, dtype=torch.uint8)
    assert enc(x).shape == (2, out)


def test_spaces_that_are_not_numeric_arrays_are_left_out_by_name():
    space = gym.spaces.Dict({"mission": gym.spaces.Text(10), "x": gym.spaces.Box(0, 1, (2,))})
    c = ObservationCodec(space)
    assert [x.name for x in c.leaves] == ["x"] and [p for p, _ in c.dropped] == ["mission"]
    assert ObservationCodec(space, ignore=("mission",)).dropped == []


def test_leaf_views_need_no_copy_when_rows_are_aligned():
    c = ObservationCodec(NESTED)
    rows = torch.as_tensor(np.stack([c.pack(OBS)] * 3))
    deep = leaf_tensor(rows, c.leaves[1])
    assert deep.data_ptr() == rows.data_ptr() + 8 and deep[0].tolist() == [0.5, -0.25]


def test_replay_round_trip_of_structured_observations_with_n_step():
    """Packed rows through the n-step builder and prioritized replay come back as the same values."""
    c = ObservationCodec(NESTED)
    obs = [{**OBS, "pos": t % 3 - 1, "deep": (np.array([t / 10, -t / 10]), 10 * t)} for t in range(4)]
    rows = np.stack([c.pack(o) for o in obs])[:, None]  # [T, E=1, row]
    nstep = NStepBuilder(1, 2, 0.5)
    out = []
    for t in range(3):
        done = np.array([t == 2])
        got = nstep.step(rows[t], np.array([t]), np.array([1.0]), rows[t + 1], done, np.array([False]))
        if got is not None:
            out.append(got)
    batch = {k: np.concatenate([o[k] for o in out]) for k in out[0]}
    replay = PrioritizedReplay(8, seed=0)
    replay.add(batch)
    sample, idx, _ = replay.sample(16, 0.4)
    for i, j in enumerate(idx):
        first = int(sample["action"][i])  # transition j starts at step `first`
        u, v = c.unpack(sample["obs"][i:i + 1]), c.unpack(sample["next_obs"][i:i + 1])
        assert u["deep"][1][0] == 10 * first and u["pos"][0] == first % 3 - 1
        assert v["deep"][1][0] == 10 * min(first + 2, 3)  # n = 2, cut at the end of the episode (step 3)
        np.testing.assert_array_equal(u["img"][0], OBS["img"])
    assert sample["obs"].dtype == np.uint8 and sample["obs"].shape[1] == c.row_bytes == 80


def test_envs_with_structured_observations_get_packed_rows_and_plain_envs_are_untouched():
    lake = create_env("FrozenLake-v1", seed=0)
    assert isinstance(lake.observation_space, PackedSpace)
    assert lake.observation_space.codec.leaves[0].kind == "discrete"
    blackjack = create_env("Blackjack-v1", seed=0)
    assert [x.kind for x in blackjack.observation_space.codec.leaves] == ["discrete"] * 3
    cart = create_env("CartPole-v1", seed=0)
    assert not isinstance(cart.observation_space, PackedSpace)


def test_a_channels_last_image_env_goes_through_the_conv_path():
    from gymnasium.envs.classic_control import CartPoleEnv

    class Pixels(CartPoleEnv):
        def __init__(self, env_config=None):
            super().__init__()
            self.observation_space = gym.spaces.Box(0, 255, (40, 40, 3), np.uint8)

        def reset(self, **kw):
            super().reset(**kw)
            return np.zeros((40, 40, 3), np.uint8), {}

        def step(self, a):
            _, r, te, tr, i = super().step(a)
            return np.zeros((40, 40, 3), np.uint8), r, te, tr, i

    env = create_env(Pixels)
    net = build_network(env.observation_space, env.action_space, NetworkConfig())
    assert net.inner.torso.encoder.images["0"].channels_last
    obs, _ = env.reset(seed=0)
    assert net(torch.as_tensor(obs[None])).shape == (1, 2)


def test_a_mis_shaped_leaf_is_named():
    c = ObservationCodec(NESTED)
    with pytest.raises(ValueError, match="'cells' has shape \\(3,\\)"):
        c.pack({**OBS, "cells": np.array([1, 2, 3])})


def test_env_check_names_a_leaf_outside_its_space():
    from apexrl.envs.contract import _observation_problem

    assert "'deep.1'" in _observation_problem({**OBS, "deep": (np.zeros(2), 300)}, NESTED)
    assert _observation_problem(OBS, NESTED) is None


def test_dpg_refuses_masks_in_one_line():
    from apexrl.agents.dpg import DPGBuilder

    space = gym.spaces.Dict({"x": gym.spaces.Box(0, 1, (2,)), "action_mask": gym.spaces.MultiBinary(3)})
    with pytest.raises(EnvSpecError, match="masks"):
        DPGBuilder().check_spaces("e", PackedSpace(ObservationCodec(space)), gym.spaces.Box(-1, 1, (1,)))


def test_a_users_model_receives_the_structure_and_masks_apply_to_its_q_values():
    from apexrl.agents.dqn import DQNBuilder
    from apexrl.config import Config

    seen = {}

    class GridQ(torch.nn.Module):
        def __init__(self, obs_space, act_space):
            super().__init__()
            seen["space"] = obs_space
            self.lin = torch.nn.Linear(7 * 7 * 3 + 3, act_space.n)

        def forward(self, obs):
            seen["keys"] = sorted(obs)
            img = obs["image"].flatten(1).float() / 255
            return self.lin(torch.cat([img, obs["vector"]], dim=1))

    env = create_env("apexrl.envs.maze:MaskedMaze-v0", seed=0)
    net = DQNBuilder().make_network(Config(), env.observation_space, env.action_space, GridQ)
    obs, _ = env.reset(seed=0)
    q = net(torch.as_tensor(obs[None]))
    assert isinstance(seen["space"], gym.spaces.Dict) and seen["keys"] == ["image", "vector"]
    legal = env.observation_space.codec.legal(obs[None])[0]
    assert (q[0, ~legal] == -1e9).all() and (q[0, legal] > -1e9).all()


def test_dpg_reads_a_dict_observation_through_its_own_encoders():
    from apexrl.agents.dpg import DPGBuilder
    from apexrl.config import Config

    space = gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), "v": gym.spaces.Box(-1, 1, (2,))})
    packed = PackedSpace(ObservationCodec(space))
    cfg = Config().replace(agent="dpg")
    learner = DPGBuilder().make_learner(cfg, packed, gym.spaces.Box(-2, 2, (1,), np.float32))
    pi_params = {id(p) for p in learner.net.pi.parameters()}
    assert any(id(p) in pi_params for p in learner.net.pi[0].parameters()), "the policy owns its encoder"
    assert not any(id(p) in pi_params for p in learner.net.critic_encoder.parameters())
    rng = np.random.default_rng(0)
    codec = packed.codec
    rows = np.stack([codec.pack({"img": rng.integers(0, 255, (7, 7, 3), dtype=np.uint8),
                                 "v": rng.uniform(-1, 1, 2).astype(np.float32)}) for _ in range(8)])
    batch = {"obs": rows, "next_obs": rows[::-1].copy(), "action": rng.uniform(-2, 2, (8, 1)).astype(np.float32),
             "reward": rng.normal(size=8), "discount": np.full(8, 0.9)}
    for _ in range(3):
        priorities, stats = learner.update(batch, np.ones(8, dtype=np.float32))
    assert priorities.shape == (8,) and np.isfinite(priorities).all()
    assert learner.net(torch.as_tensor(rows)).shape == (8, 1)


def test_the_start_line_names_left_out_entries_unless_ignored():
    space = gym.spaces.Dict({"mission": gym.spaces.Text(10), "x": gym.spaces.Box(0, 1, (2,))})
    assert "left out of the network's input (not numeric arrays): 'mission' (Text)" in ObservationCodec(space).describe()
    assert "left out" not in ObservationCodec(space, ignore=("mission",)).describe()
