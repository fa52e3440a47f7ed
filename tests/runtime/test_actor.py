"""The actor, in-process: batched sends with local priorities, its own epsilons, non-blocking weight pulls."""

import numpy as np

from apexrl.config import Config
from apexrl.runtime.assembly import assemble


class ListSink:
    def __init__(self):
        self.batches, self.flushed = [], 0

    def add(self, batch, priorities):
        self.batches.append((batch, priorities))

    def flush(self):
        self.flushed += 1


class CountingWeights:
    def __init__(self, weights):
        self.weights, self.polls = weights, 0

    def poll(self):
        self.polls += 1
        return (self.polls, self.weights) if self.polls == 1 else None


def cfg(**over):
    base = {"actors.envs_per_actor": 3, "actors.send_every": 50, "actors.weight_sync_period": 30,
            "network.torso": [16], "network.head": 16, "replay.learning_starts": 10}
    base.update(over)
    return Config().replace(**base)


def Actor(cfg, index, num_actors, sink, weights=None):
    return assemble(cfg, num_actors=num_actors).make_actor(index, sink, weights)


def test_transitions_go_to_replay_in_batches_with_positive_priorities():
    sink = ListSink()
    actor = Actor(cfg(), 0, 2, sink)
    stats = actor.run(200)
    assert stats["env_steps"] == 600
    assert len(sink.batches) >= 5
    for batch, prios in sink.batches:
        B = len(batch["action"])
        assert B >= 50, "sends are batched, never one transition at a time"
        assert set(batch) == {"obs", "action", "reward", "discount", "next_obs"}
        assert batch["obs"].shape == (B, 4) and prios.shape == (B,)
        assert np.all(prios > 0) and np.all(np.isfinite(prios))
        assert np.all((batch["discount"] == 0) | (batch["discount"] > 0.9))
    actor.close()
    assert sink.flushed == 1
    sent = sum(len(b["action"]) for b, _ in sink.batches)
    assert sent == actor.transitions_sent


def test_each_actor_has_its_slice_of_the_epsilon_schedule():
    a0 = Actor(cfg(), 0, 2, ListSink())
    a1 = Actor(cfg(), 1, 2, ListSink())
    eps = np.sort(np.concatenate([a0.policy.exploration, a1.policy.exploration]))
    np.testing.assert_allclose(eps, np.sort(0.4 ** (1 + 7 * np.arange(6) / 5)))


def test_weights_are_pulled_every_sync_period_and_loaded():
    donor = Actor(cfg(), 0, 1, ListSink())
    weights = {k: v + 1.0 for k, v in donor.policy.net.state_dict().items()}  # CartPole's MLP acts in numpy
    src = CountingWeights(weights)
    actor = Actor(cfg(), 0, 1, ListSink(), weights=src)
    actor.run(100)  # 300 env steps, sync every 30
    assert src.polls == 10
    assert actor.weights_version == 1
    for k, v in actor.policy.net.state_dict().items():
        np.testing.assert_allclose(v, weights[k])


def test_same_seed_same_experience():
    s1, s2 = ListSink(), ListSink()
    Actor(cfg(), 0, 1, s1).run(60)
    Actor(cfg(), 0, 1, s2).run(60)
    for (b1, p1), (b2, p2) in zip(s1.batches, s2.batches):
        for k in b1:
            np.testing.assert_array_equal(b1[k], b2[k])


def test_with_non_finite_drop_an_actor_sends_only_finite_transitions_and_counts_what_it_dropped():
    import apexrl.envs.testing  # noqa: F401  (registers NaNReward-v0: NaN every 50th step of each env)

    sink = ListSink()
    n = 3  # learner.n_step: a NaN reward is in the n-step return of the transition it ends and of n - 1 before
    actor = Actor(cfg(**{"env.id": "apexrl.envs.testing:NaNReward-v0", "env.non_finite": "drop"}), 0, 1, sink)
    stats = actor.run(100)  # 3 envs x 100 steps: each env's 50th and 100th step are NaN
    actor.close()
    assert stats["nonfinite_steps"] == 6
    assert all(np.isfinite(b["reward"]).all() and np.isfinite(p).all() for b, p in sink.batches)
    assert 6 <= stats["nonfinite_dropped"] <= 6 * n  # fewer than n each where an episode ended inside the window
    assert all(np.isfinite(r) for r in stats["episode_returns"])


def test_by_default_a_non_finite_reward_ends_the_actors_chunk_naming_env_slot_and_step():
    import pytest

    import apexrl.envs.testing  # noqa: F401
    from apexrl.envs.contract import NonFiniteEnvError

    actor = Actor(cfg(**{"env.id": "apexrl.envs.testing:NaNReward-v0"}), 0, 1, ListSink())
    with pytest.raises(NonFiniteEnvError, match="non-finite reward .nan. in actor 0, env slot 0, at the actor's env "
                                                 "step 147"):
        actor.run(100)
