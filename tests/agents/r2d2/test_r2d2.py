"""R2D2's pieces by hand: value rescaling, the priority mix, n-step targets inside padded sequences, a
recurrent unroll that restarts at episode starts, burn-in from the stored state reproducing the actor's
state exactly, and the actor's initial priorities equal to the learner's."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.agents import get_builder
from apexrl.agents.r2d2.loss import burn_in_states, h, h_inv, nstep_targets, priority_mix
from apexrl.config import Config


def test_h_and_its_inverse_undo_each_other():
    x = torch.tensor([-1e4, -37.5, -1.0, -1e-3, 0.0, 2e-3, 0.5, 3.0, 1e5], dtype=torch.float64)
    assert torch.allclose(h(h_inv(x, 1e-3), 1e-3), x, rtol=1e-9, atol=1e-9)
    assert torch.allclose(h_inv(h(x, 1e-3), 1e-3), x, rtol=1e-9, atol=1e-9)
    assert h(torch.tensor([3.0], dtype=torch.float64), 0.01).item() == pytest.approx(1.0 + 0.03)  # sqrt(4) - 1


def test_priority_mixes_max_and_mean_over_the_valid_steps_only():
    td = torch.tensor([[1.0, 3.0, 100.0], [2.0, 2.0, 2.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    assert priority_mix(td, mask, 0.9).tolist() == pytest.approx([0.9 * 3 + 0.1 * 2, 2.0])


G = 0.5
BOOT = torch.tensor([[10.0, 20.0, 30.0, 40.0, 50.0]], dtype=torch.float64)  # value of observation positions 0..4


def targets(valid, terminal, n=2, start=1):
    return nstep_targets(torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.tensor([terminal]), torch.tensor([valid]),
                         BOOT, start, n, G)[0].tolist()


def test_nstep_targets_bootstrap_after_n_steps_or_from_the_observation_after_the_last_valid_step():
    # all valid: t=1: 2 + .5*3 + .25*v3; t=2: 3 + .5*4 + .25*v4; t=3: 4 + .5*v4 (the sequence ends)
    assert targets([1, 1, 1, 1], [0, 0, 0, 0]) == pytest.approx([3.5 + 0.25 * 40, 5 + 0.25 * 50, 4 + 0.5 * 50])
    # right padding after step 2 (a truncated episode): t=2 bootstraps from position 3, its final observation
    assert targets([1, 1, 1, 0], [0, 0, 0, 0]) == pytest.approx([3.5 + 0.25 * 40, 3 + 0.5 * 40, 0.0])
    # the episode terminates at step 2: no bootstrap after it
    assert targets([1, 1, 1, 0], [0, 0, 1, 0]) == pytest.approx([3.5, 3.0, 0.0])
    # n = 3 from position 0 with left padding at 0: the padding step gets nothing
    assert targets([0, 1, 1, 1], [0, 0, 0, 0], n=3, start=0) == pytest.approx(
        [0.0, 2 + 0.5 * 3 + 0.25 * 4 + 0.125 * 50, 3 + 0.5 * 4 + 0.25 * 50, 4 + 0.5 * 50])


def config(cell="lstm", **over):
    return Config().replace(**{"agent": "r2d2", "network.torso": [8], "network.head": 8, "r2d2.cell": cell,
                               "r2d2.cell_size": 4, "r2d2.burn_in": 3, "r2d2.seq_len": 2, "learner.n_step": 2,
                               "learner.batch_size": 4, "replay.capacity": 400, "replay.learning_starts": 10,
                               **over})


SPACE = gym.spaces.Box(-1, 1, (3,), np.float64)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_an_episode_start_inside_a_sequence_restarts_the_unroll_from_zero(cell):
    net = get_builder("r2d2").make_network(config(cell), SPACE, gym.spaces.Discrete(2)).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    s0 = torch.randn(2, net.state_size, dtype=torch.float64)
    begin = torch.tensor([[0, 0, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)
    q, _ = net(x, s0, begin)
    q_after, _ = net(x[:1, 2:], net.initial_state(1))
    q_plain, _ = net(x[1:], s0[1:])
    assert torch.allclose(q[0, 2:], q_after[0]) and torch.allclose(q[1], q_plain[0])


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_burn_in_from_the_stored_state_reproduces_the_actors_state_exactly(cell):
    cfg = config(cell)
    builder = get_builder("r2d2")
    net = builder.make_network(cfg, SPACE, gym.spaces.Discrete(2)).double()
    policy = builder.make_actor_policy(cfg, net, gym.spaces.Discrete(2), 0, 1, 2, seed=0)
    writer = builder.make_writer(cfg, policy, 2)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(2, 3))
    states, seqs = {}, []  # the actor's state before acting on each observation, by its first value
    for t in range(40):
        action = policy.act(obs)
        for e in range(2):
            states[obs[e, 0]] = policy.state_before[e].copy()
        nxt = rng.normal(size=(2, 3))
        done = np.array([t % 11 == 10, t % 7 == 6])
        got = writer.step(obs, action, rng.normal(size=2), nxt, done, np.zeros(2, bool))
        if got is not None:
            seqs += [{k: v[i] for k, v in got.items()} for i in range(len(got["valid"]))]
        policy.reset_slots(done)
        obs = nxt
    B0 = cfg.r2d2.burn_in
    checked = 0
    for s in seqs:
        if not s["valid"][B0]:
            continue
        o, st = torch.as_tensor(s["obs"][None]), torch.as_tensor(s["state"][None])
        begin = torch.nn.functional.pad(torch.as_tensor(s["first"][None]).bool(), (0, 1))
        got = burn_in_states(net, o, st, begin, B0)
        # to float64 rounding: a fused unroll of one row and the actor's steps over two rows differ in the last bit
        assert torch.allclose(got[0], torch.as_tensor(states[s["obs"][B0, 0]]), rtol=1e-12, atol=1e-13)
        checked += 1
    assert checked >= 10


def test_the_actors_initial_priorities_are_what_the_learner_computes_with_the_same_weights():
    cfg = config(**{"r2d2.use_h_function": True})
    builder = get_builder("r2d2")
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    learner = builder.make_learner(cfg, space, gym.spaces.Discrete(2))
    policy = builder.make_actor_policy(cfg, builder.make_network(cfg, space, gym.spaces.Discrete(2)),
                                       gym.spaces.Discrete(2), 0, 1, 4, seed=1)
    policy.set_weights(learner.weights())
    writer = builder.make_writer(cfg, policy, 4)
    rng = np.random.default_rng(1)
    obs, parts = rng.normal(size=(4, 3)).astype(np.float32), []
    for t in range(30):
        action = policy.act(obs)
        nxt = rng.normal(size=(4, 3)).astype(np.float32)
        done = rng.random(4) < 0.1
        got = writer.step(obs, action, rng.normal(size=4), nxt, done, np.zeros(4, bool))
        parts += [got] if got is not None else []
        policy.reset_slots(done)
        obs = nxt
    batch = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    expected = policy.priorities(batch)
    prios, metrics = learner.update(batch, np.ones(len(expected), np.float32))
    assert prios.shape == expected.shape and np.allclose(prios, expected, rtol=1e-5)
    assert learner.updates == 1 and np.isfinite(metrics["loss"])
