"""Actors of DQN's built-in MLP act in numpy: the same Q-values as the learner's torch network for the
same weights, and no torch in an actor's process."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.agents.dqn.networks import build_network
from apexrl.agents.dqn.numpy_q import NumpyQNetwork, numpy_acting, numpy_q_network
from apexrl.config import Config, NetworkConfig
from apexrl.core import state_dict_to_numpy


@pytest.mark.parametrize("dueling", [True, False])
@pytest.mark.parametrize("activation", ["relu", "tanh", "linear"])
def test_numpy_network_computes_the_torch_networks_q_values_with_its_weights(dueling, activation):
    space = gym.spaces.Box(-5, 5, (3, 2), np.float64)  # flattened by the torso, cast to float32
    net_cfg = NetworkConfig(torso=(16, 8), head=12, dueling=dueling, activation=activation)
    torch.manual_seed(3)
    torch_net = build_network(space, gym.spaces.Discrete(4), net_cfg).eval()
    mine = NumpyQNetwork(6, 4, net_cfg, seed=0)
    mine.load(state_dict_to_numpy(torch_net))
    x = np.random.default_rng(0).uniform(-5, 5, (7, 3, 2))
    with torch.no_grad():
        want = torch_net(torch.as_tensor(x)).numpy()
    got = mine(x)
    assert got.dtype == np.float32 and got.shape == (7, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dueling_head_by_hand():
    """One unit each, identity-like weights: Q = V + A - mean(A)."""
    cfg = NetworkConfig(torso=(1,), head=1, dueling=True, activation="linear")
    net = NumpyQNetwork(1, 2, cfg, seed=0)
    one = np.ones((1, 1), np.float32)
    net.load({"torso.net.1.weight": one, "torso.net.1.bias": np.zeros(1, np.float32),
              "head.value.0.weight": one, "head.value.0.bias": np.zeros(1, np.float32),
              "head.value.2.weight": 3 * one, "head.value.2.bias": np.zeros(1, np.float32),
              "head.advantage.0.weight": one, "head.advantage.0.bias": np.zeros(1, np.float32),
              "head.advantage.2.weight": np.array([[1.0], [-1.0]], np.float32),
              "head.advantage.2.bias": np.zeros(2, np.float32)})
    # x = 2: h = 2; V = 3 * relu(2) = 6; A = (2, -2), mean 0 -> Q = (8, 4). x = -1: relu -> 0 -> Q = (0, 0).
    np.testing.assert_allclose(net(np.array([[2.0], [-1.0]])), [[8.0, 4.0], [0.0, 0.0]])


def test_initial_weights_follow_the_seed_and_torchs_default_bounds():
    cfg = NetworkConfig(torso=(64,), head=32)
    a, b, c = (NumpyQNetwork(4, 2, cfg, seed=s).state_dict() for s in (1, 1, 2))
    assert all(np.array_equal(a[k], b[k]) for k in a) and not np.array_equal(a["torso.net.1.weight"],
                                                                          c["torso.net.1.weight"])
    torch.manual_seed(0)
    torch_keys = state_dict_to_numpy(build_network(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), cfg))
    assert {k: v.shape for k, v in a.items()} == {k: v.shape for k, v in torch_keys.items()}
    assert np.abs(a["torso.net.1.weight"]).max() <= 1 / np.sqrt(4)  # U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert np.abs(a["head.value.2.weight"]).max() <= 1 / np.sqrt(32)


def test_weights_of_another_network_are_refused_with_the_key_that_does_not_fit():
    net = NumpyQNetwork(4, 2, NetworkConfig(torso=(8,), head=4), seed=0)
    weights = net.state_dict()
    weights["torso.net.1.weight"] = np.zeros((16, 4), np.float32)
    with pytest.raises(ValueError, match=r"'torso.net.1.weight' is \(16, 4\), expected \(8, 4\)"):
        net.load(weights)


@pytest.mark.parametrize("space, kwargs, numpy", [
    (gym.spaces.Box(-1, 1, (4,)), {}, True),
    (gym.spaces.Box(-1, 1, (4,)), {"device": "auto", "precision": "auto"}, True),
    (gym.spaces.Box(-1, 1, (4,)), {"device": "cuda"}, False),
    (gym.spaces.Box(-1, 1, (4,)), {"precision": "bfloat16"}, False),
    (gym.spaces.Box(-1, 1, (4,)), {"has_model_factory": True}, False),
    (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), {}, False),  # a CNN torso
    (gym.spaces.Box(0, 1, (4, 10, 10), np.uint8), {}, True),  # MinAtar's one-conv torso
    (gym.spaces.Dict({"a": gym.spaces.Discrete(3)}), {}, False),  # structured: per-leaf encoders
])
def test_which_networks_act_in_numpy(space, kwargs, numpy):
    kwargs = {"has_model_factory": False, **kwargs}
    assert numpy_acting(Config(), space, **kwargs) is numpy


def test_a_cartpole_actor_acts_and_prioritizes_without_loading_torch():
    code = """
import sys
from apexrl.config import Config
from apexrl.runtime.assembly import assemble
sent = []
class Sink:
    def add(self, batch, prios): sent.append(len(prios))
    def flush(self): pass
actor = assemble(Config(), num_actors=1).make_actor(0, Sink())
actor.run(200)
assert sum(sent) > 0, sent
print("torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_an_image_actor_still_acts_with_torch():
    space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    cfg = Config()
    from apexrl.agents.dqn import DQNBuilder

    net = DQNBuilder().make_acting_network(cfg, space, gym.spaces.Discrete(3), None, seed=0)
    assert isinstance(net, torch.nn.Module)
    with pytest.raises(ValueError, match="does not get the MLP torso"):
        numpy_q_network(cfg, space, gym.spaces.Discrete(3), seed=0)


@pytest.mark.parametrize("head", [{}, {"distribution": "quantile", "num_atoms": 5}, {"dueling": False}])
def test_minatars_conv_torso_in_numpy_computes_what_torch_does(head):
    space = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)
    net_cfg = NetworkConfig(kind="minatar", head=12, **head)
    torch.manual_seed(1)
    torch_net = build_network(space, gym.spaces.Discrete(3), net_cfg).eval()
    mine = numpy_q_network(Config(network=net_cfg), space, gym.spaces.Discrete(3), seed=0)
    mine.load(state_dict_to_numpy(torch_net))
    x = (np.random.default_rng(0).random((6, 4, 10, 10)) < 0.3).astype(np.uint8)
    with torch.no_grad():
        want = torch_net.acting_outputs(torch.as_tensor(x)).numpy()
    np.testing.assert_allclose(mine(x), want, rtol=1e-5, atol=1e-5)
