"""Multi-agent envs: per-agent transitions checked by hand on scripted games (turn-based and parallel), n-step
per agent, evaluation against a random player per seat, and one line for bad input."""

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo import ParallelEnv
from pettingzoo.classic import tictactoe_v3

from apexrl.config import from_dict
from apexrl.envs import EnvSpecError
from apexrl.envs.multiagent import GameError, as_game
from apexrl.envs.multiagent.play import evaluate_game
from apexrl.runtime.assembly import assemble


class Sink:
    def __init__(self):
        self.batches = []

    def add(self, batch, prios):
        self.batches.append(batch)

    def flush(self):
        pass

    def all(self):
        return {k: np.concatenate([b[k] for b in self.batches]) for k in self.batches[0]}


class Scripted:
    """Plays the moves of a script in order, whoever is to move (one game copy)."""

    exploration_name = "epsilon"

    def __init__(self, moves, slots):
        self.moves, self.exploration = list(moves), np.zeros(slots)

    def act(self, obs, keys=None, slots=None):
        return np.array([self.moves.pop(0) for _ in range(len(obs))])

    def priorities(self, batch):
        return np.ones(len(batch["action"]))

    def observe_global_steps(self, n):
        pass

    def reset_slots(self, mask):
        pass


def env_section(env):
    """A string id as a section; a class or creator handed over as RLlib users do."""
    return {"env": {"id": env}} if isinstance(env, str) else {"env": env}


def actor_for(env, moves, n_step=1, gamma=0.5):
    cfg = from_dict({**env_section(env), "actors": {"envs_per_actor": 1, "send_every": 1},
                     "learner": {"n_step": n_step, "gamma": gamma}})
    sink = Sink()
    actor = assemble(cfg, num_actors=1).make_actor(0, sink)
    lane = actor.lanes[0]  # one policy plays every agent
    lane.policy = Scripted(moves, len(lane.rows))
    return actor, sink


def planes(actor, row):
    """(my cells, their cells) of a packed tic-tac-toe row, cells numbered as PettingZoo's actions."""
    board = actor.views["player_1"].codec.unpack(row[None])["observation"][0]  # [3, 3, 2]
    flat = board.reshape(9, 2)
    return set(np.flatnonzero(flat[:, 0])), set(np.flatnonzero(flat[:, 1]))


def test_a_turn_based_transition_runs_to_the_agents_next_move_and_the_loser_is_paid_at_the_winners_move():
    # player_1 takes cells 0, 1, 2 (a line) while player_2 takes 3 and 4: five moves, player_1 wins
    actor, sink = actor_for("pettingzoo.classic.tictactoe_v3", [0, 3, 1, 4, 2])
    actor.run(5)
    actor.close()
    t = sink.all()
    by = {(int(a), float(r), float(d)) for a, r, d in zip(t["action"], t["reward"], t["discount"])}
    # player_1: 0 -> its next move (0 paid), 1 -> next (0), 2 -> won (+1, terminal); player_2: 3 (0), 4 (-1, terminal)
    assert by == {(0, 0.0, 0.5), (1, 0.0, 0.5), (2, 1.0, 0.0), (3, 0.0, 0.5), (4, -1.0, 0.0)}
    first = np.flatnonzero(t["action"] == 0)[0]
    # observations are the mover's own view: player_1's next observation holds both its and player_2's move
    assert planes(actor, t["obs"][first]) == (set(), set())
    assert planes(actor, t["next_obs"][first]) == ({0}, {3})
    won = np.flatnonzero(t["action"] == 2)[0]
    assert planes(actor, t["obs"][won]) == ({0, 1}, {3, 4})
    assert actor.returns == [1.0, -1.0] or sorted(actor.returns) == [-1.0, 1.0]
    assert actor.env_steps == 5


def test_n_step_returns_are_per_agent_across_the_opponents_moves():
    # the same game with n=2, gamma 0.5: player_2's first transition spans its own two moves: 0 + 0.5 * (-1)
    actor, sink = actor_for("pettingzoo.classic.tictactoe_v3", [0, 3, 1, 4, 2], n_step=2)
    actor.run(5)
    actor.close()
    t = sink.all()
    got = sorted((int(a), float(r), float(d)) for a, r, d in zip(t["action"], t["reward"], t["discount"]))
    assert got == [(0, 0.0, 0.25), (1, 0.5, 0.0), (2, 1.0, 0.0), (3, -0.5, 0.0), (4, -1.0, 0.0)]


class Relay(ParallelEnv):
    """Two runners; 'a' stops after 2 steps (terminated), 'b' is cut off after 4 (truncated). Observation:
    the step count; reward: 1 per step to each runner still in."""

    metadata = {"name": "relay"}
    possible_agents = ["a", "b"]

    def observation_space(self, agent):
        return gym.spaces.Box(0, 10, (1,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, ["a", "b"]
        return {a: np.array([0.0], np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs = {a: np.array([self.t], np.float32) for a in self.agents}
        rew = {a: 1.0 for a in self.agents}
        term = {a: a == "a" and self.t == 2 for a in self.agents}
        trunc = {a: a == "b" and self.t == 4 for a in self.agents}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, {a: {} for a in obs}


def test_a_parallel_agent_that_leaves_mid_episode_ends_alone_and_the_other_goes_on():
    actor, sink = actor_for(Relay, [0, 1] * 4, n_step=1, gamma=0.5)
    actor.run(4)
    actor.close()
    t = sink.all()
    rows = sorted((float(o[0]), float(r), float(d), float(n[0])) for o, r, d, n in
                  zip(t["obs"], t["reward"], t["discount"], t["next_obs"]))
    # a: 0->1, 1->2 (terminal); b: 0->1, 1->2, 2->3, 3->4 (truncated: bootstraps from 4)
    assert rows == [(0.0, 1.0, 0.5, 1.0), (0.0, 1.0, 0.5, 1.0), (1.0, 1.0, 0.0, 2.0), (1.0, 1.0, 0.5, 2.0),
                    (2.0, 1.0, 0.5, 3.0), (3.0, 1.0, 0.5, 4.0)]
    assert sorted(actor.returns) == [2.0, 4.0] and sorted(actor.lengths) == [2, 4]


class Undead(Relay):
    """'a' terminates at step 1 but keeps being asked to act."""

    def step(self, actions):
        obs, rew, term, trunc, info = super().step(actions)
        term["a"] = self.t == 1
        self.agents = ["a", "b"]
        return obs, rew, term, trunc, info


def test_an_agent_asked_to_act_after_its_end_is_one_line():
    actor, _ = actor_for(Undead, [0] * 10)
    with pytest.raises(GameError, match="asked agent 'a' to act after its episode ended"):
        actor.run(3)


class Lopsided(Relay):
    """Relay where 'b' sees its step count twice: agents with different observation spaces."""

    def observation_space(self, agent):
        return gym.spaces.Box(0, 10, (1 if agent == "a" else 2,), np.float32)

    def _widen(self, obs):
        return {a: np.repeat(o, 2) if a == "b" else o for a, o in obs.items()}

    def reset(self, seed=None, options=None):
        obs, info = super().reset(seed, options)
        return self._widen(obs), info

    def step(self, actions):
        obs, *rest = super().step(actions)
        return (self._widen(obs), *rest)


def test_agents_with_different_spaces_get_a_policy_each_by_default():
    system = assemble(from_dict({"env": Lopsided}), num_actors=1)
    assert system.policy_ids == ("a", "b") and system.cfg.multiagent.policy_mapping == {"a": "a", "b": "b"}
    assert [m.observation_space.shape for m in system.policies] == [(1,), (2,)]


def test_agents_with_different_spaces_under_one_named_policy_is_one_line():
    with pytest.raises(EnvSpecError, match="policy 'shared' plays agents 'a' and 'b' .* whose spaces differ"):
        assemble(from_dict({"env": Lopsided, "multiagent": {"policies": ["shared"],
                                                            "policy_mapping": {"*": "shared"}}}), num_actors=1)


def test_env_api_named_but_not_what_the_env_is_is_one_line():
    with pytest.raises(EnvSpecError, match="env.api' = 'parallel' but env 'CartPole-v1' is a gymnasium id"):
        assemble(from_dict({"env": {"id": "CartPole-v1", "api": "parallel"}}), num_actors=1)


@pytest.mark.parametrize("env_id", ["pettingzoo.classic.tictactoe_v3", "classic/tictactoe-v3", tictactoe_v3.env])
def test_a_pettingzoo_game_is_handed_over_by_module_registry_id_or_function(env_id):
    system = assemble(from_dict(env_section(env_id)), num_actors=1)
    assert system.cfg.env.api == "aec" and system.action_space == gym.spaces.Discrete(9)


def test_rllib_style_creator_gets_env_config():
    seen = {}

    def creator(config):
        seen.update(config)
        return tictactoe_v3.env()

    assemble(from_dict({"env": creator, "env_config": {"x": 1}}), num_actors=1)
    assert seen == {"x": 1}


def test_as_game_leaves_single_agent_envs_alone():
    assert as_game(gym.make("CartPole-v1")) is None


class FirstLegal:
    """Always the first legal cell."""

    def act(self, obs, keys=None, slots=None):
        legal = self.codec.legal(obs)
        return legal.argmax(axis=1)

    def reset_slots(self, mask):
        pass


def test_evaluation_against_random_reports_each_seat_and_counts_every_game():
    cfg = assemble(from_dict({"env": {"id": "pettingzoo.classic.tictactoe_v3"}}), num_actors=1).cfg
    from apexrl.envs.multiagent.make import agent_views, make_game

    game = make_game(cfg.env)
    views = agent_views(game, cfg.env, game.reset(seed=0).to_act)
    policy = FirstLegal()
    policy.codec = views["player_1"].codec
    res = evaluate_game(lambda rows: policy, cfg, episodes=50, seed=3)
    assert len(res["eval_returns"]) == 100
    for seat in ("player_1", "player_2"):
        rates = res["eval_seats"][seat]
        assert rates["win"] + rates["draw"] + rates["loss"] == pytest.approx(1.0)
    # playing first, the first-legal-cell line (0, 1, 2...) beats a random player more often than it loses
    assert res["eval_seats"]["player_1"]["win"] > res["eval_seats"]["player_1"]["loss"]
    assert res == evaluate_game(lambda rows: policy, cfg, episodes=50, seed=3)


def test_an_agent_that_cannot_act_by_slot_is_refused_for_a_game_with_one_line(monkeypatch):
    from apexrl.agents.r2d2 import R2D2Builder
    from apexrl.config import ConfigError

    monkeypatch.setattr(R2D2Builder, "acts_by_slot", False)  # an agent that can only act for every slot at once
    with pytest.raises(ConfigError, match="'agent' = 'r2d2' cannot train the multi-agent env .*allowed there: dqn, dpg"):
        assemble(from_dict({"env": {"id": "pettingzoo.classic.tictactoe_v3"}, "agent": "r2d2"}), num_actors=1)


def test_a_module_path_to_a_submodule_its_package_does_not_import_gives_its_env(tmp_path, monkeypatch):
    pkg = tmp_path / "mygames"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ttt_v0.py").write_text("from pettingzoo.classic import tictactoe_v3\n"
                                   "def env(**kwargs):\n    return tictactoe_v3.env(**kwargs)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    system = assemble(from_dict({"env": {"id": "mygames.ttt_v0"}}), num_actors=1)
    assert system.cfg.env.api == "aec"


def first_legal(agent, obs, info):
    """An opponent function as a user writes one: the first legal cell."""
    return int(np.flatnonzero(obs["action_mask"])[0])


def test_evaluation_against_a_users_function_calls_it_with_the_raw_observation():
    cfg = assemble(from_dict({"env": {"id": "pettingzoo.classic.tictactoe_v3"},
                              "multiagent": {"opponent": "test_multiagent.first_legal"}}), num_actors=1).cfg
    from apexrl.envs.multiagent.make import agent_views, make_game

    game = make_game(cfg.env)
    policy = FirstLegal()
    policy.codec = agent_views(game, cfg.env, game.reset(seed=0).to_act)["player_1"].codec
    res = evaluate_game(lambda rows: policy, cfg, episodes=5, seed=0)
    # first-legal against first-legal is one game, the same every time: player_1 takes 0, 1, 2 and wins
    assert res["eval_seats"]["player_1"] == {"win": 1.0, "draw": 0.0, "loss": 0.0}
    assert res["eval_seats"]["player_2"] == {"win": 0.0, "draw": 0.0, "loss": 1.0}


def test_an_opponent_that_names_nothing_is_one_line():
    from apexrl.config import ConfigError

    with pytest.raises(ConfigError, match="'multiagent.opponent' = 'nobody' is invalid; allowed: auto, random, self"):
        assemble(from_dict({"env": {"id": "pettingzoo.classic.tictactoe_v3"}, "multiagent": {"opponent": "nobody"}}),
                 num_actors=1)
