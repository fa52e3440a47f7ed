"""Distributional heads (C51, QR-DQN) and noisy layers, checked by hand on tiny cases."""

import numpy as np
import pytest
import torch

from apexrl.agents.dqn.distributional import (
    CategoricalHead,
    QuantileHead,
    ValueHead,
    project_categorical,
    quantile_huber,
    quantile_midpoints,
    support,
)
from apexrl.agents.dqn.noisy import NoisyLinear, set_noise
from apexrl.agents.dqn.numpy_q import numpy_q_network
from apexrl.config import ConfigError, load
from apexrl.runtime.assembly import assemble

Z = support(-1.0, 1.0, 3)  # atoms at -1, 0, 1
P = np.array([[0.2, 0.3, 0.5]])


def project(p, r, d):
    return project_categorical(np.asarray(p, np.float64), np.array([r], np.float64), np.array([d], np.float64),
                               Z.astype(np.float64))


def test_support_and_quantile_midpoints():
    assert Z.tolist() == [-1.0, 0.0, 1.0]
    assert quantile_midpoints(4).tolist() == [0.125, 0.375, 0.625, 0.875]


def test_projection_is_the_identity_for_no_reward_and_no_discount_loss():
    assert np.allclose(project(P, 0.0, 1.0), P)


def test_projection_splits_an_atom_between_its_two_neighbours():
    # R + Z = [-0.5, 0.5, 1.5]: -0.5 splits 0.2 evenly over -1 and 0, 0.5 splits 0.3 over 0 and 1, 1.5 is
    # beyond the support and lands on 1 with its 0.5
    assert np.allclose(project(P, 0.5, 1.0), [[0.1, 0.25, 0.65]])


def test_a_terminal_target_puts_all_mass_on_the_reward():
    assert np.allclose(project(P, 0.0, 0.0), [[0.0, 1.0, 0.0]])
    assert np.allclose(project(P, 0.25, 0.0), [[0.0, 0.75, 0.25]])
    assert np.allclose(project(P, -7.0, 0.0), [[1.0, 0.0, 0.0]]), "clipped to the support's lower end"


def test_projection_conserves_mass_and_torch_agrees_with_numpy():
    rng = np.random.default_rng(0)
    z = support(-10, 10, 51).astype(np.float64)
    p = rng.dirichlet(np.ones(51), size=64)
    r, d = rng.normal(0, 5, 64), rng.choice([0.0, 0.9, 0.99 ** 3], 64)
    ours = project_categorical(p, r, d, z)
    assert np.allclose(ours.sum(axis=1), 1.0)
    assert (ours >= 0).all()
    theirs = project_categorical(torch.tensor(p), torch.tensor(r), torch.tensor(d), torch.tensor(z), xp=torch)
    assert np.allclose(theirs.numpy(), ours)
    # the projection's mean is the clipped Bellman mean where nothing falls off the support
    inside = np.abs(r) + 10 * d <= 10
    assert np.allclose((ours @ z)[inside], (r + d * (p @ z))[inside])


@pytest.mark.parametrize("pred,target,tau,expected", [
    (0.0, 2.0, 0.5, 0.5 * (2.0 - 0.5)),     # |u| > kappa: linear part, weight tau
    (2.0, 0.0, 0.25, 0.75 * (2.0 - 0.5)),   # u < 0: weight 1 - tau
    (0.0, 0.5, 0.9, 0.9 * 0.5 * 0.25),      # |u| <= kappa: quadratic part
])
def test_quantile_huber_loss_by_hand(pred, target, tau, expected):
    got = quantile_huber(np.array([[pred]]), np.array([[target]]), np.array([tau]))
    assert got == pytest.approx([expected])
    got_t = quantile_huber(torch.tensor([[pred]]), torch.tensor([[target]]), torch.tensor([tau]), xp=torch)
    assert got_t.tolist() == pytest.approx([expected])


def test_quantile_loss_sums_over_predictions_and_averages_over_targets():
    # two quantiles (taus 1/4, 3/4) at 0, two target samples at -1 and +1: each pair's Huber is 0.5
    pred, target, taus = np.zeros((1, 2)), np.array([[-1.0, 1.0]]), quantile_midpoints(2)
    # tau 1/4: (0.75 * 0.5 + 0.25 * 0.5) / 2 = 0.25; tau 3/4: the same
    assert quantile_huber(pred, target, taus) == pytest.approx([0.5])


def test_heads_take_means_for_acting():
    probs = np.array([[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]])  # action 0 returns +1, action 1 returns -1
    assert CategoricalHead(-1, 1, 3).q(probs).tolist() == [[1.0, -1.0]]
    assert QuantileHead(2).q(np.array([[[1.0, 3.0], [0.0, 0.0]]])).tolist() == [[2.0, 0.0]]


def test_priorities_are_zero_where_the_prediction_is_its_target():
    head = CategoricalHead(-1, 1, 3)
    out = np.array([[[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]]])  # Q = 0 and 0.3: the next state's best is action 1
    target = project(P, 0.0, 1.0)[0]
    assert head.priorities(out[:, [1, 0]], out, np.array([0]), np.zeros(1), np.ones(1), 1e-6) == pytest.approx(
        [1e-6], abs=1e-9), "KL of the projected target to itself"
    assert np.allclose(target, P)
    far = head.priorities(out, out, np.array([0]), np.zeros(1), np.ones(1), 1e-6)
    assert far[0] > 1.0, "a point mass at 0 against a target with mass elsewhere"
    # a mask on the next state picks its best legal action: action 0, with Q 0
    legal = np.array([[True, False]])
    masked = head.priorities(out, out, np.array([0]), np.zeros(1), np.ones(1), 0.0, legal)
    assert masked == pytest.approx([0.0], abs=1e-9)


def test_quantile_priorities_and_the_plain_heads_td_error():
    out = np.array([[[1.0, 1.0], [5.0, 5.0]]])
    # target for action 0: r + d * quantiles of the best next action (mean 5) = 0.5 + 0.5 * 5 = 3; |u| = 2
    p = QuantileHead(2).priorities(out, out, np.array([0]), np.array([0.5]), np.array([0.5]), 0.0)
    assert p == pytest.approx([2 * 0.5 * (2 - 0.5)])
    q = np.array([[1.0, 5.0]])
    assert ValueHead().priorities(q, q, np.array([0]), np.array([0.5]), np.array([0.5]), 0.0) == pytest.approx([2.0])


def test_noisy_layer_samples_per_call_and_plays_its_means_when_off():
    torch.manual_seed(0)
    layer = NoisyLinear(4, 3, sigma0=0.5)
    x = torch.ones(2, 4)
    a, b = layer(x), layer(x)
    assert not torch.equal(a, b), "fresh noise on every call"
    assert torch.equal(a[0], a[1]), "one draw per call, shared by the batch's rows"
    set_noise(layer, False)
    assert torch.equal(layer(x), layer(x))
    assert torch.allclose(layer(x), x @ layer.weight_mu.T + layer.bias_mu)
    assert torch.allclose(layer.weight_sigma, torch.full((3, 4), 0.5 / 2)), "sigma0 / sqrt(fan_in)"


@pytest.mark.parametrize("over", [
    ["network.distribution=categorical"],
    ["network.distribution=quantile", "network.num_atoms=8", "network.dueling=false"],
    ["network.noisy=true"],
    ["network.distribution=categorical", "network.noisy=true", "network.num_atoms=11"],
])
def test_numpy_actors_compute_what_the_torch_network_does(over):
    cfg = load("cartpole", over)
    system = assemble(cfg, num_actors=1)
    net = set_noise(system.make_network(), False)
    acting = numpy_q_network(cfg, system.observation_space, system.action_space, seed=1)
    acting.load({k: v.detach().numpy() for k, v in net.state_dict().items()})
    acting.noise = False
    x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    assert np.allclose(net.acting_outputs(torch.tensor(x)).detach().numpy(), acting(x), atol=1e-5)
    if cfg.network.noisy:
        acting.noise = True
        assert not np.array_equal(acting(x), acting(x)), "actors' noise is fresh per call in numpy too"


def test_greedy_evaluation_plays_without_noise_and_actors_without_epsilon():
    cfg = load("cartpole", ["network.noisy=true"])
    system = assemble(cfg, num_actors=1)
    net = system.make_network()
    ev = system.make_eval_policy(net, 4, seed=0)
    x = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    assert np.array_equal(ev._q_values(x), ev._q_values(x))
    actor = system.builder.make_actor_policy(cfg, system.make_acting_network(0), system.action_space, 0, 1, 4, 0)
    assert (actor.exploration == 0).all(), "the noise explores (Rainbow)"
    keep = cfg.replace(**{"actors.epsilon_with_noise": True})
    actor = system.builder.make_actor_policy(keep, system.make_acting_network(0), system.action_space, 0, 1, 4, 0)
    assert (actor.exploration > 0).all()


@pytest.mark.parametrize("kind", ["categorical", "quantile"])
def test_the_learner_fits_a_terminal_reward(kind):
    cfg = load("cartpole", [f"network.distribution={kind}", "network.num_atoms=21", "network.v_min=-2",
                            "network.v_max=2", "learner.lr=1e-2"])
    system = assemble(cfg, num_actors=1)
    learner = system.make_learner()
    b = 16
    obs = np.tile(np.array([[0.1, 0.2, 0.3, 0.4]], np.float32), (b, 1))
    batch = {"obs": obs, "next_obs": obs, "action": np.zeros(b, np.int64), "reward": np.ones(b, np.float32),
             "discount": np.zeros(b, np.float32)}
    first, _ = learner.update(batch, np.ones(b, np.float32))
    for _ in range(300):
        prios, metrics = learner.update(batch, np.ones(b, np.float32))
    assert metrics["q_mean"] == pytest.approx(1.0, abs=0.1)
    assert prios.mean() < first.mean() / 5, "priorities are the per-sample loss and shrink with it"
    q = learner.net(torch.as_tensor(obs[:1])).detach()
    assert float(q[0, 0]) == pytest.approx(1.0, abs=0.1)


def test_head_settings_are_validated_with_one_line():
    with pytest.raises(ConfigError, match="network.num_atoms"):
        load("cartpole", ["network.distribution=quantile", "network.num_atoms=1"])
    with pytest.raises(ConfigError, match="network.v_max"):
        load("cartpole", ["network.distribution=categorical", "network.v_min=5", "network.v_max=5"])
    with pytest.raises(ConfigError, match="network.distribution.*agent 'r2d2'"):
        load("cartpole", ["agent=r2d2", "network.distribution=categorical"])
    with pytest.raises(ConfigError, match="did you mean 'quantile'"):
        load("cartpole", ["network.distribution=quantiles"])
