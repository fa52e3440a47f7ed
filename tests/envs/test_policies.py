"""Several policies in one multi-agent env: which policy plays whom (tables, patterns, RLlib's mapping
functions, one per distinct space), what each policy trains with, the actor's routing of each agent's
transitions to its own policy's shards, and one line for each kind of bad input."""

import gymnasium as gym
import numpy as np
import pytest

from apexrl.config import ConfigError, from_dict
from apexrl.envs import EnvSpecError
from apexrl.envs.multiagent.examples import MultiAgentCartPole
from apexrl.runtime.assembly import assemble
from apexrl.runtime.local import build_local
from apexrl.runtime.policy_set import join, split

CARTPOLES = "apexrl.envs.multiagent.examples.MultiAgentCartPole"


def two(mapping, **multiagent):
    return from_dict({"env": {"id": CARTPOLES, "kwargs": {"num_agents": 2}},
                      "multiagent": {"policies": {"p0": {}, "p1": {}}, "policy_mapping": mapping, **multiagent},
                      "actors": {"envs_per_actor": 2, "send_every": 4}, "replay": {"learning_starts": 64}})


def mapped_by(fn):
    """A module-level function for the dotted-path form."""
    return f"p{fn}"


@pytest.mark.parametrize("mapping", [
    {"0": "p0", "1": "p1"},  # a table by agent id
    {"0": "p0", "*": "p1"},  # a pattern: first match wins
    lambda agent_id, episode, worker=None, **kw: f"p{agent_id}",  # RLlib's signature
    lambda agent_id, *args, **kwargs: f"p{agent_id}",  # RLlib's examples' shorthand
    "tests.envs.test_policies.mapped_by",  # a dotted path, as in YAML
])
def test_every_form_of_mapping_gives_the_same_table_which_the_config_keeps(mapping):
    system = assemble(two(mapping), num_actors=1)
    assert system.policy_ids == ("p0", "p1")
    assert system.cfg.multiagent.policy_mapping == {"0": "p0", "1": "p1"}


def test_each_policy_trains_with_the_runs_settings_and_its_own():
    cfg = from_dict({"env": {"id": CARTPOLES}, "multiagent": {
        "policies": {"p0": {"config": {"lr": 1e-3, "gamma": 0.9}}, "p1": None}, "policy_mapping": {"*0": "p0", "*": "p1"}}})
    p0, p1 = assemble(cfg, num_actors=1).policies
    assert (p0.cfg.learner.lr, p0.cfg.learner.gamma) == (1e-3, 0.9)
    assert (p1.cfg.learner.lr, p1.cfg.learner.gamma) == (cfg.learner.lr, cfg.learner.gamma)
    assert (p0.cfg.multiagent.policy_id, p1.cfg.multiagent.policy_id) == ("p0", "p1")


def test_one_named_policy_is_the_shared_one():
    cfg = from_dict({"env": {"id": CARTPOLES}, "multiagent": {"policies": {"main": {"config": {"gamma": 0.5}}}}})
    system = assemble(cfg, num_actors=1)
    assert system.policies == () and system.policy_ids == ("main",) and system.cfg.learner.gamma == 0.5


def test_weights_of_several_policies_travel_as_one_flat_set_and_split_back():
    per = {"p0": {"head.weight": np.ones(2), "a/b": np.zeros(1)}, "p1": {"head.weight": np.full(2, 3.0)}}
    flat = join(per)
    assert sorted(flat) == ["p0/a/b", "p0/head.weight", "p1/head.weight"]
    back = split(flat)
    assert sorted(back) == ["p0", "p1"] and sorted(back["p0"]) == ["a/b", "head.weight"]


def test_each_agents_transitions_go_to_its_own_policys_shards_and_only_trained_policies_learn():
    local = build_local(two({"0": "p0", "1": "p1"}, policies_to_train=["p0"]))
    system = local.system
    assert system.num_shards == 1 and [m.cfg.multiagent.policy_id for m in system.trained] == ["p0"]
    actor = local.actors[0]
    assert [lane.slots.tolist() for lane in actor.lanes] == [[0, 2], [1, 3]]  # slot = copy * agents + agent
    before = local.loop.learner.weights()
    for _ in range(40):
        if local.inserting_allowed():
            local.act(8)
        local.learn(8)
    inserted = local.shards[0].inserted
    after = local.loop.learner.weights()
    moved = {k.split("/")[0] for k in before if not np.array_equal(before[k], after[k])}
    assert moved == {"p0"}  # p1 acts and never learns
    assert actor.lanes[1].writer is None and actor.lanes[0].transitions_sent > 0
    assert local.loop.learner.updates > 0 and inserted == actor.lanes[0].transitions_sent > 0
    local.close()


def test_both_policies_trained_have_a_group_of_shards_each():
    cfg = two({"0": "p0", "1": "p1"}).replace(**{"replay.num_shards": 2})
    local = build_local(cfg)
    assert local.system.num_shards == 4
    for _ in range(30):
        if local.inserting_allowed():
            local.act(8)
        local.learn(4)
    inserted = [s.inserted for s in local.shards]
    assert all(n > 0 for n in inserted), inserted  # both groups filled, each by its own policy's agents
    assert [lane.transitions_sent for lane in local.actors[0].lanes] == [sum(inserted[:2]), sum(inserted[2:])]
    assert all(lr.updates > 0 for lr in local.loop.learner.learners.values())
    local.close()


@pytest.mark.parametrize("multiagent,message", [
    ({"policies": ["p0", "p1"], "policy_mapping": {"0": "p0", "1": "p9"}},
     "maps agent '1' to policy 'p9', not one of multiagent.policies: p0, p1"),
    ({"policies": ["p0", "p1"], "policy_mapping": {"0": "p0"}}, "maps no policy to agent '1'"),
    ({"policies": ["p0", "p1"]}, "names 2 policies .* but no multiagent.policy_mapping"),
    ({"policies": {"p0": {"observation_space": str(gym.spaces.Box(-1, 1, (3,))), "action_space": None},
                   "p1": {}}, "policy_mapping": {"0": "p0", "1": "p1"}},
     "policy 'p0' declares observation_space Box.* but agent '0' it plays has Box"),
    ({"policies": ["p0", "p1", "p2"], "policy_mapping": {"0": "p0", "1": "p1"}}, "policy 'p2' .* plays no agent"),
    ({"policy_mapping": "no_such_module.fn"}, "cannot import it"),
    ({"policy_mapping": lambda agent_id, *a, **k: 1 / 0}, "the function raised ZeroDivisionError"),
])
def test_bad_policies_are_one_line_at_start_up(multiagent, message):
    with pytest.raises(EnvSpecError, match=message):
        assemble(from_dict({"env": MultiAgentCartPole, "multiagent": multiagent}), num_actors=1)


@pytest.mark.parametrize("multiagent,message", [
    ({"policies": {"p0": {"config": {"replay.num_shards": 3}}}}, "sets 'replay.num_shards', which is the run's"),
    ({"policies": {"p0": {"agent": "ppo"}}}, "multiagent.policies.p0.agent' = 'ppo'"),
    ({"policies": ["a", "b"], "policies_to_train": ["c"]}, "names 'c', not one of multiagent.policies"),
])
def test_bad_policy_settings_are_one_line_before_any_env(multiagent, message):
    with pytest.raises(ConfigError, match=message):
        from_dict({"env": CARTPOLES, "multiagent": multiagent})


def test_a_recurrent_policy_beside_a_feed_forward_one_trains_its_own_sequences():
    cfg = two({"0": "p0", "1": "p1"}).replace(**{"multiagent.policies": {"p0": {"agent": "r2d2"}, "p1": {}},
                                                  "r2d2.burn_in": 2, "r2d2.seq_len": 4})
    local = build_local(cfg)
    assert [m.cfg.agent for m in local.system.policies] == ["r2d2", "dqn"]
    for _ in range(40):
        if local.inserting_allowed():
            local.act(8)
        local.learn(4)
    assert all(lr.updates > 0 for lr in local.loop.learner.learners.values())
    for shard in local.shards:
        shard.stop_rate_limiting()
    assert "state" in local.shards[0].sample(4, 0.4)["batch"]  # p0's group holds sequences with their state
    assert "next_obs" in local.shards[1].sample(4, 0.4)["batch"]  # p1's holds n-step transitions
    local.close()
