"""DPG acting: action scaling to the env's box, Ape-X's spread of noise, uniform warm-up, actor-side
priorities, and the action spaces the agent refuses."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.agents import get_builder
from apexrl.agents.dpg.networks import ActionScale, ActorCritic
from apexrl.agents.dpg.policy import NoisePolicy, actor_noise_scales, noise_scale_schedule
from apexrl.config import Config
from apexrl.envs import EnvSpecError

BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


def test_unit_actions_map_to_the_box_and_back_and_are_clipped():
    s = ActionScale(BOX)
    np.testing.assert_allclose(s.to_env(np.array([[-1.0, 1.0], [0.0, 0.0], [3.0, -5.0]])),
                               [[-2.0, 1.0], [0.0, 0.5], [2.0, 0.0]])
    np.testing.assert_allclose(s.to_unit(np.array([[-2.0, 1.0], [1.0, 0.25]])), [[-1.0, 1.0], [0.5, -0.5]])
    assert s.to_env(np.zeros((1, 2))).dtype == np.float32


def test_noise_is_spread_geometrically_over_env_slots_and_interleaved_over_actors():
    np.testing.assert_allclose(noise_scale_schedule(3, 0.4, 0.1), [0.4, 0.2, 0.1])
    np.testing.assert_allclose(noise_scale_schedule(3, 0.4, 0.0), [0.4, 0.2, 0.0])  # linear to zero
    np.testing.assert_allclose(actor_noise_scales(0, 2, 2, 0.8, 0.1), [0.8, 0.2])  # slots 0, 2 of .8 .4 .2 .1
    np.testing.assert_allclose(actor_noise_scales(1, 2, 2, 0.8, 0.1), [0.4, 0.1])
    np.testing.assert_allclose(actor_noise_scales(1, 2, 3, 0.8, 0.2, per="actor"), [0.2, 0.2, 0.2])


def _policy(noise, warmup=0, seed=0):
    torch.manual_seed(0)
    net = ActorCritic(3, (2,), [8], critics=2)
    return net, NoisePolicy(net, ActionScale(BOX), np.asarray(noise, float), seed, 1e-6, warmup)


def test_warm_up_acts_uniformly_within_the_box_then_the_noiseless_slot_acts_greedily():
    net, p = _policy([0.0, 0.0], warmup=4)
    obs = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    first = p.act(obs)
    assert ((first >= BOX.low) & (first <= BOX.high)).all()
    second = p.act(obs)
    assert not np.allclose(first, second)  # still random: 4 env steps of warm-up = 2 calls of 2 envs
    greedy = p.act(obs)
    with torch.no_grad():
        expected = ActionScale(BOX).to_env(net(torch.as_tensor(obs)).numpy())
    np.testing.assert_allclose(greedy, expected, rtol=1e-6)
    np.testing.assert_allclose(p.act(obs), greedy)  # no noise: deterministic


def test_noise_scales_with_each_slots_std():
    _, p = _policy([0.0, 0.5], seed=1)
    obs = np.zeros((2, 3), np.float32)
    acts = np.stack([p.act(obs) for _ in range(200)])
    assert np.ptp(acts[:, 0], axis=0).max() == 0.0
    assert acts[:, 1].std(axis=0).min() > 0.1


def test_actor_priorities_are_the_td_error_of_its_own_critics():
    net, p = _policy([0.1, 0.1])
    rng = np.random.default_rng(3)
    b = {"obs": rng.normal(size=(4, 3)).astype(np.float32), "next_obs": rng.normal(size=(4, 3)).astype(np.float32),
         "action": rng.uniform(BOX.low, BOX.high, size=(4, 2)).astype(np.float32),
         "reward": np.array([1.0, 0.0, -1.0, 2.0], np.float32), "discount": np.array([0.9, 0.9, 0.0, 0.81], np.float32)}
    with torch.no_grad():
        nxt = torch.as_tensor(b["next_obs"])
        q_next = net.q(nxt, net(nxt)).min(0).values.numpy()
        unit = ActionScale(BOX).to_unit(b["action"])
        q_sa = net.q(torch.as_tensor(b["obs"]), torch.as_tensor(unit))[0].numpy()
    expected = np.abs(b["reward"] + b["discount"] * q_next - q_sa) + 1e-6
    np.testing.assert_allclose(p.priorities(b), expected, rtol=1e-5)


@pytest.mark.parametrize("space, message", [
    (gym.spaces.Discrete(3), "needs a continuous (Box) one (set agent=dqn"),
    (gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), "needs finite bounds"),
])
def test_dpg_refuses_what_it_cannot_act_in(space, message):
    with pytest.raises(EnvSpecError) as e:
        get_builder("dpg").check_spaces("X-v0", gym.spaces.Box(-1, 1, (3,)), space)
    assert message in str(e.value)


def test_dqn_points_continuous_envs_to_dpg():
    with pytest.raises(EnvSpecError, match="set agent=dpg"):
        get_builder("dqn").check_spaces("Pendulum-v1", gym.spaces.Box(-1, 1, (3,)), BOX)


def test_the_builder_gives_each_actor_its_noise_and_share_of_the_warm_up():
    cfg = Config().replace(**{"agent": "dpg", "replay.learning_starts": 1000, "dpg.noise_max": 0.8,
                              "dpg.noise_min": 0.1, "network.torso": [8]})
    b = get_builder("dpg")
    net = b.make_network(cfg, gym.spaces.Box(-1, 1, (3,)), BOX)
    p = b.make_actor_policy(cfg, net, BOX, 1, 2, 2, seed=0)
    np.testing.assert_allclose(p.exploration, [0.4, 0.1])
    assert p.warmup_steps == 500
    assert b.make_eval_policy(cfg, net, BOX, 3, seed=0).exploration.tolist() == [0.0, 0.0, 0.0]


def test_a_users_model_factory_builds_the_policy_and_critics():
    from torch import nn

    class Mine(nn.Module):  # the DPG model contract: forward -> [-1, 1] actions, .pi, q(obs, a) -> [C, B]
        def __init__(self):
            super().__init__()
            self.pi = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2), nn.Tanh())
            self.critic = nn.Linear(5, 1)

        def forward(self, obs):
            return self.pi(obs.float())

        def q(self, obs, action):
            return self.critic(torch.cat([obs.float(), action.float()], 1)).T

    cfg = Config().replace(**{"agent": "dpg", "learner.batch_size": 4})
    obs_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    learner = get_builder("dpg").make_learner(cfg, obs_space, BOX, model_factory=lambda o, a: Mine())
    assert isinstance(learner.net, Mine)
    rng = np.random.default_rng(0)
    b = {"obs": rng.normal(size=(4, 3)).astype(np.float32), "next_obs": rng.normal(size=(4, 3)).astype(np.float32),
         "action": rng.uniform(BOX.low, BOX.high, size=(4, 2)).astype(np.float32),
         "reward": np.ones(4, np.float32), "discount": np.full(4, 0.9, np.float32)}
    critic0 = learner.net.critic.weight.clone()
    prios, _ = learner.update(b, np.ones(4, np.float32))
    assert prios.shape == (4,) and not torch.equal(critic0, learner.net.critic.weight)


def test_ou_noise_has_each_slots_std_and_is_correlated_over_steps_as_theta_says():
    theta, steps = 0.15, 20000
    policy = NoisePolicy(torch.nn.Identity(), ActionScale(BOX), np.array([1.0, 0.1]), 0, 1e-6, ou_theta=theta)
    x = np.stack([policy._noise((2, 2)) for _ in range(steps)])  # [T, slots, action dims], unit std
    assert np.std(x) == pytest.approx(1.0, abs=0.05)
    lag1 = np.mean([np.corrcoef(x[:-1, s, d], x[1:, s, d])[0, 1] for s in range(2) for d in range(2)])
    assert lag1 == pytest.approx(1 - theta, abs=0.02)  # Gaussian noise: 0
    gaussian = NoisePolicy(torch.nn.Identity(), ActionScale(BOX), np.array([1.0]), 0, 1e-6)
    g = np.stack([gaussian._noise((1, 1)) for _ in range(steps)])[:, 0, 0]
    assert abs(np.corrcoef(g[:-1], g[1:])[0, 1]) < 0.03


def test_ou_noise_of_a_slot_that_does_not_act_stays_where_it_was():
    policy = NoisePolicy(torch.nn.Identity(), ActionScale(BOX), np.array([1.0, 1.0]), 0, 1e-6, ou_theta=0.15)
    policy._noise((2, 2))
    before = policy._ou.copy()
    policy._noise((1, 2), np.array([1]))  # only slot 1 moves (a turn-based game's agent to move)
    assert np.array_equal(policy._ou[0], before[0]) and not np.array_equal(policy._ou[1], before[1])


def test_the_builder_gives_actors_ou_noise_when_the_config_asks():
    cfg = Config().replace(**{"agent": "dpg", "env.id": "Pendulum-v1", "dpg.noise": "ou", "dpg.ou_theta": 0.3})
    builder = get_builder("dpg")
    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    net = builder.make_network(cfg, gym.spaces.Box(-1, 1, (3,), np.float32), space)
    assert builder.make_actor_policy(cfg, net, space, 0, 1, 4, 0).ou_theta == 0.3
    assert builder.make_actor_policy(Config().replace(**{"agent": "dpg", "env.id": "Pendulum-v1"}), net, space, 0, 1,
                                     4, 0).ou_theta is None
