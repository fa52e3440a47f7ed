"""Self-play against a league: an actor's own pool of past weights, what each new game's opponent is, and that
only the learner's seat of a game against a snapshot or random goes to replay."""

import numpy as np
import pytest

from apexrl.config import ConfigError, from_dict
from apexrl.runtime.assembly import assemble
from apexrl.runtime.league import RANDOM, SELF, League


class Held:
    def set_weights(self, w):
        self.w = w


def league(p_latest=0.0, p_random=0.0, every=10, size=2, seed=0):
    return League(p_latest, p_random, every, size, Held, np.random.default_rng(seed))


def test_a_snapshot_every_so_many_updates_and_the_oldest_goes_when_the_pool_is_full():
    lg = league(every=10, size=2)
    taken = [lg.offer({"w": np.array([v])}, v) for v in (0, 5, 10, 19, 20, 30)]
    assert taken == [True, False, True, False, True, True]
    assert sorted(lg.versions) == [20, 30] and sorted(float(p.w["w"][0]) for p in lg.pool) == [20.0, 30.0]


def test_the_snapshot_is_a_copy_not_the_weights_the_actor_goes_on_with():
    lg = league()
    w = {"w": np.zeros(2)}
    lg.offer(w, 0)
    w["w"][:] = 7
    assert lg.pool[0].w["w"].tolist() == [0.0, 0.0]


def test_opponents_are_drawn_in_the_configured_shares():
    lg = league(p_latest=0.5, p_random=0.2)
    lg.offer({"w": np.zeros(1)}, 0)
    draws = np.array([lg.draw() for _ in range(20_000)])
    assert np.mean(draws == SELF) == pytest.approx(0.5, abs=0.02)
    assert np.mean(draws == RANDOM) == pytest.approx(0.2, abs=0.02)
    assert np.mean(draws == 0) == pytest.approx(0.3, abs=0.02)


def test_with_an_empty_pool_a_snapshot_game_is_plain_self_play():
    lg = league(p_latest=0.0, p_random=0.0)
    assert {lg.draw() for _ in range(50)} == {SELF}


class Sink:
    def __init__(self):
        self.n = 0

    def add(self, batch, prios):
        self.n += len(batch["action"])

    def flush(self):
        pass


def test_against_random_only_the_learners_seat_is_sent_and_counted():
    base = {"env": {"id": "pettingzoo.classic.tictactoe_v3"}, "actors": {"envs_per_actor": 4, "send_every": 1},
            "learner": {"n_step": 1}}
    plain = assemble(from_dict(base), num_actors=1).make_actor(0, Sink())
    sink = Sink()
    vs_random = assemble(from_dict({**base, "multiagent": {"self_play": {"p_latest": 0.0, "p_random": 1.0}}}),
                         num_actors=1).make_actor(0, sink)
    stats = vs_random.run(200)
    assert (vs_random._is_foe.reshape(4, 2).sum(axis=1) == 1).all()  # one seat of every game is the opponent's
    assert sink.n > 0 and stats["episode_returns"]
    ps = plain.run(200)
    assert len(stats["episode_returns"]) < len(ps["episode_returns"])  # only the learner's seat counts
    # every transition sent was the learner seat's: as many as its moves, roughly half of all moves
    assert sink.n == pytest.approx(plain.transitions_sent / 2, rel=0.25)


def test_a_league_of_several_policies_is_one_line():
    cfg = from_dict({"env": {"id": "apexrl.envs.multiagent.examples.MultiAgentCartPole"},
                     "multiagent": {"policies": ["p0", "p1"], "policy_mapping": {"0": "p0", "1": "p1"},
                                    "self_play": {"p_latest": 0.5}}})
    with pytest.raises(ConfigError, match="a league trains one shared policy"):
        assemble(cfg, num_actors=1)


@pytest.mark.parametrize("self_play,message", [({"p_latest": 1.5}, "p_latest"),
                                               ({"p_latest": 0.5, "p_random": 0.8}, "1 - p_latest = 0.5")])
def test_bad_shares_are_one_line(self_play, message):
    with pytest.raises(ConfigError, match=message):
        from_dict({"multiagent": {"self_play": self_play}})
