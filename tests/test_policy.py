"""Acting in numpy: the same Q-values as the torch network, from the same weights, without torch."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.config import EnvConfig, NetworkConfig
from apexrl.evaluation import evaluate
from apexrl.networks import build_network, state_dict_to_numpy
from apexrl.policy import NumpyQNetwork, TorchQ, numpy_network

BOX = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)


@pytest.mark.parametrize("hidden,dueling", [((32,), True), ((64, 32), True), ((16, 16, 8), True),
                                            ((64, 32), False), ((8,), False)])
def test_numpy_network_computes_the_torch_networks_q_values(hidden, dueling):
    cfg = NetworkConfig(kind="mlp", hidden_sizes=hidden, dueling=dueling)
    torch.manual_seed(0)
    net = build_network(BOX, gym.spaces.Discrete(3), cfg)
    q = numpy_network(cfg, BOX, gym.spaces.Discrete(3))
    q.load(state_dict_to_numpy(net))
    obs = np.random.default_rng(0).standard_normal((17, 4)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.as_tensor(obs)).numpy()
    np.testing.assert_allclose(q(obs), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(q(obs).argmax(axis=1), expected.argmax(axis=1))


def test_its_initial_weights_have_the_torch_layout_and_scale():
    cfg = NetworkConfig(kind="mlp", hidden_sizes=(64, 32), dueling=True)
    net = build_network(BOX, gym.spaces.Discrete(2), cfg)
    q = numpy_network(cfg, BOX, gym.spaces.Discrete(2), seed=1)
    ref = state_dict_to_numpy(net)
    assert {k: v.shape for k, v in q.state_dict().items()} == {k: v.shape for k, v in ref.items()}
    w = q.state_dict()["torso.net.1.weight"]
    assert 0 < np.abs(w).max() <= 1 / np.sqrt(4)  # U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as torch.nn.Linear
    np.testing.assert_array_equal(w, numpy_network(cfg, BOX, gym.spaces.Discrete(2), seed=1).state_dict()[
        "torso.net.1.weight"])  # seeded


def test_weights_of_another_network_are_refused_with_the_names_that_differ():
    q = NumpyQNetwork(4, 2, (16, 16), dueling=True)
    other = state_dict_to_numpy(build_network(BOX, gym.spaces.Discrete(2), NetworkConfig(hidden_sizes=(16, 16),
                                                                                         dueling=False)))
    with pytest.raises(ValueError, match="missing .*head.value"):
        q.load(other)
    bad = q.state_dict()
    bad["torso.net.1.weight"] = np.zeros((8, 4), np.float32)
    with pytest.raises(ValueError, match=r"torso.net.1.weight.*\(8, 4\).*\(16, 4\)"):
        q.load(bad)


def test_images_and_the_nature_cnn_stay_in_torch():
    img = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert numpy_network(NetworkConfig(), img, gym.spaces.Discrete(6)) is None
    assert numpy_network(NetworkConfig(kind="nature_cnn"), img, gym.spaces.Discrete(6)) is None
    assert numpy_network(NetworkConfig(), BOX, gym.spaces.Discrete(2)) is not None


def test_greedy_evaluation_is_the_same_with_either_network():
    cfg = NetworkConfig(hidden_sizes=(32, 32))
    torch.manual_seed(3)
    net = build_network(BOX, gym.spaces.Discrete(2), cfg)
    q = numpy_network(cfg, BOX, gym.spaces.Discrete(2))
    q.load(state_dict_to_numpy(net))
    env = EnvConfig(id="CartPole-v1")
    assert evaluate(q, env, 3, seed=5) == evaluate(net, env, 3, seed=5) == evaluate(TorchQ(net), env, 3, seed=5)


def test_an_actor_and_the_evaluator_with_the_builtin_mlp_never_import_torch():
    code = """
import sys
from apexrl.actor import Actor
from apexrl.config import Config
from apexrl.evaluation import evaluate
import apexrl.runtime.acting

class Sink:
    def add(self, batch, priorities): pass
    def flush(self): pass

cfg = Config().replace(**{"actors.envs_per_actor": 2, "actors.send_every": 8})
actor = Actor(cfg, 0, 1, Sink())
actor.run(20)
actor.close()
evaluate(actor.q, cfg.env, 2)
assert "torch" not in sys.modules, "torch was imported"
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
