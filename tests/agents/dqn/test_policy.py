"""The actor's forward pass: channels-last layout and bfloat16 change speed, not what the network computes."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.agents.dqn.networks import build_network
from apexrl.agents.dqn.policy import EpsilonGreedyPolicy
from apexrl.config import NetworkConfig


@pytest.fixture
def pixels_net():
    torch.manual_seed(0)
    obs = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    return build_network(obs, gym.spaces.Discrete(6), NetworkConfig(kind="nature_cnn", head=64))


def states(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, 4, 84, 84), dtype=np.uint8)


def test_float32_policy_computes_the_networks_q_values(pixels_net):
    reference = copy.deepcopy(pixels_net).eval()
    policy = EpsilonGreedyPolicy(pixels_net, 6, np.zeros(8), seed=0, priority_eps=1e-6)
    x = states(8)
    with torch.no_grad():
        want = reference(torch.as_tensor(x))
    got = policy.q(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(policy.act(x), want.argmax(1).numpy())  # epsilon 0: greedy


def test_bfloat16_policy_is_close_and_returns_float32(pixels_net):
    reference = copy.deepcopy(pixels_net).eval()
    policy = EpsilonGreedyPolicy(pixels_net, 6, np.zeros(64), seed=0, priority_eps=1e-6, precision="bfloat16")
    x = states(64, seed=1)
    with torch.no_grad():
        want = reference(torch.as_tensor(x))
    got = torch.as_tensor(policy.q(x))
    assert got.dtype == torch.float32
    # bfloat16 keeps 8 bits of mantissa: Q-values to ~1% of their scale.
    scale = want.abs().max().item()
    assert (got - want).abs().max().item() <= 0.02 * scale + 1e-4
    gap = want.topk(2, dim=1).values
    clear = (gap[:, 0] - gap[:, 1]) > 0.05 * scale  # where the best action is clear, bf16 picks it too
    assert (got.argmax(1)[clear] == want.argmax(1)[clear]).all()


def test_weights_loaded_later_keep_the_fast_layout(pixels_net):
    from apexrl.core import state_dict_to_numpy

    policy = EpsilonGreedyPolicy(pixels_net, 6, np.zeros(2), seed=0, priority_eps=1e-6)
    torch.manual_seed(1)
    other = build_network(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6),
                          NetworkConfig(kind="nature_cnn", head=64)).eval()
    policy.set_weights(state_dict_to_numpy(other))
    conv = next(p for p in policy.net.parameters() if p.dim() == 4)
    assert conv.is_contiguous(memory_format=torch.channels_last)
    x = states(4, seed=2)
    with torch.no_grad():
        np.testing.assert_allclose(policy.q(x), other(torch.as_tensor(x)).numpy(), rtol=1e-4, atol=1e-5)


def test_an_annealed_epsilon_falls_with_the_runs_env_steps_from_start_to_each_slots_own():
    """RLlib's EpsilonGreedy: linear from eps_start over the run's env steps (all actors), then each slot's own."""
    net = torch.nn.Linear(4, 2)
    final = np.array([0.1, 0.02])
    policy = EpsilonGreedyPolicy(net, 2, final, seed=0, priority_eps=1e-6, anneal=(1.0, 1000, 4))
    np.testing.assert_allclose(policy.exploration, [1.0, 1.0])
    policy.observe_global_steps(500)  # the driver's count: half-way
    np.testing.assert_allclose(policy.exploration, [0.55, 0.51])
    for _ in range(25):  # 25 vector steps of 2 envs here ~ 200 env steps of 4 such actors
        policy.act(np.zeros((2, 4), np.float32))
    np.testing.assert_allclose(policy.exploration, 1.0 + (final - 1.0) * 0.7)
    policy.observe_global_steps(5000)  # past the end: a resumed run starts there, not from eps_start
    np.testing.assert_allclose(policy.exploration, final)


def test_the_builder_anneals_only_when_asked():
    from apexrl.agents import get_builder
    from apexrl.config import Config

    builder, space = get_builder("dqn"), gym.spaces.Discrete(2)
    net = torch.nn.Linear(4, 2)
    plain = builder.make_actor_policy(Config(), net, space, 0, 2, 3, 0)
    assert plain.anneal is None
    cfg = Config().replace(**{"actors.eps_anneal_steps": 1000, "actors.eps_start": 0.9})
    assert builder.make_actor_policy(cfg, net, space, 1, 2, 3, 0).anneal == (0.9, 1000, 2)


def test_an_annealed_epsilon_never_climbs_back_when_the_count_comes_in_below_the_actors_own_guess():
    net = torch.nn.Linear(4, 2)
    policy = EpsilonGreedyPolicy(net, 2, np.array([0.1, 0.02]), seed=0, priority_eps=1e-6, anneal=(1.0, 1000, 4))
    policy.observe_global_steps(500)
    for _ in range(25):  # its guess: 500 + 50 own steps x 4 actors = 700
        policy.act(np.zeros((2, 4), np.float32))
    before = policy.exploration.copy()
    policy.observe_global_steps(600)  # the others were slower: the run is at 600, not 700
    np.testing.assert_allclose(policy.exploration, before)
    policy.observe_global_steps(800)
    np.testing.assert_allclose(policy.exploration, 1.0 + (np.array([0.1, 0.02]) - 1.0) * 0.8)
