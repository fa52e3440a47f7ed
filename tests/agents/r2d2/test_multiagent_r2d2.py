"""R2D2 in a multi-agent game: a recurrent state per agent of each game copy, stepped only when that agent
moves, sequences per agent, and a learner that trains on them."""

import numpy as np
import torch

from apexrl.config import from_dict
from apexrl.envs.multiagent.make import agent_views, make_game
from apexrl.runtime.assembly import assemble
from apexrl.runtime.local import build_local


def r2d2_game(**over):
    return from_dict({"env": {"id": "pettingzoo.classic.tictactoe_v3"}, "agent": "r2d2",
                      "actors": {"envs_per_actor": 2, "send_every": 8},
                      "r2d2": {"burn_in": 2, "seq_len": 4, "cell_size": 16},
                      "replay": {"learning_starts": 64}, **over})


def test_acting_for_some_slots_steps_only_their_recurrent_state():
    system = assemble(r2d2_game(), num_actors=1)
    net = system.make_acting_network(0)
    policy = system.builder.make_actor_policy(system.cfg, net, system.action_space, 0, 1, 4, 0)
    policy.state = torch.arange(4, dtype=torch.float32)[:, None].repeat(1, policy.state.shape[1])
    before = policy.state.clone()
    game = make_game(system.cfg.env)
    turn = game.reset(seed=0)
    views = agent_views(game, system.cfg.env, turn.to_act)
    agent, (obs, info) = next(iter(turn.to_act.items()))
    rows = np.stack([views[agent].row(obs, info)] * 2)  # an opening position, as packed for the network
    policy.act(rows, None, np.array([1, 3]))
    assert torch.equal(policy.state[[0, 2]], before[[0, 2]])  # slots that did not move keep their state
    assert not torch.equal(policy.state[[1, 3]], before[[1, 3]])
    assert np.array_equal(policy.state_before[[1, 3]], before[[1, 3]].numpy())  # what the writer stores


def test_r2d2_self_play_sends_each_agents_sequences_and_the_learner_trains_on_them():
    local = build_local(r2d2_game())
    before = local.loop.learner.weights()
    for _ in range(60):
        if local.inserting_allowed():
            local.act(8)
        local.learn(4)
    assert local.shards[0].inserted > 0 and local.loop.learner.updates > 0
    after = local.loop.learner.weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    local.close()
