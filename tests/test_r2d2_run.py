"""The recurrent agent through the whole system, as users run it: a private Ray, actors sending sequences,
replay counting them in transitions, checkpoints with replay, resume, the greedy evaluation and the
in-process runner."""

import json

import numpy as np
import pytest
import ray
import torch
from fakes import tiny_config

from apexrl import checkpoint as ckpt
from apexrl.replay.shard import ReplayShard
from apexrl.runtime.assembly import assemble
from apexrl.runtime.driver import train

pytestmark = pytest.mark.timeout(300)
ENV = "apexrl.envs.stateless:CartPoleNoVel-v1"


def tiny(**over):
    return tiny_config(**{"agent": "r2d2", "env.id": ENV, "r2d2.cell_size": 16, "r2d2.seq_len": 8,
                          "r2d2.burn_in": 4, "learner.batch_size": 8, "evaluation.interval_s": 0.5,
                          "evaluation.episodes": 2, "checkpoint.every_reports": 2, "checkpoint.replay": True,
                          "stop.max_env_steps": 6_000, **over})


def test_replay_counts_sequences_in_transitions():
    cfg = tiny(**{"replay.capacity": 4_800, "replay.learning_starts": 480, "replay.samples_per_insert": 4.0})
    kw = assemble(cfg, num_actors=2).shard_kwargs(0)
    # a sequence brings 8 new steps (12 stored, 4 shared) and trains 8: 600 sequences, 60 before learning,
    # and 4 samples per inserted transition are 4 * 8 / 8 sampled per inserted sequence
    assert (kw["capacity"], kw["min_size"], kw["samples_per_insert"]) == (600, 60, 4.0)


def test_r2d2_trains_checkpoints_and_resumes_with_its_replay_of_sequences(tmp_path):
    run = tmp_path / "run"
    first = train(tiny(), run_dir=run)
    assert not ray.is_initialized()
    assert first.env_steps >= 6_000 and first.learner_updates > 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("eval_return_mean" in r for r in records)
    _, state = ckpt.load_latest(run)
    shard = ReplayShard(5_000 // 8)  # transitions / new steps per sequence
    shard.load_state_dict(state["replay"][0])
    batch, _, _ = shard.buffer.sample(4, 0.4)
    assert batch["obs"].shape == (4, 13, 2) and batch["state"].shape == (4, 32)  # 12 steps + successor; h, c
    assert batch["valid"].sum() > 0
    saved = len(shard.buffer)
    net_before = {k: v.clone() for k, v in state["learner"]["net"].items()}

    second = train(tiny(**{"stop.max_env_steps": 9_000}), resume=run)
    assert second.env_steps >= 9_000 and second.learner_updates >= first.learner_updates
    after = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    resumed = [r for r in after if r["env_steps"] > first.env_steps and r.get("replay_size") is not None]
    assert resumed and resumed[0]["replay_size"] >= saved, "replay restored, not restarted empty"
    _, state2 = ckpt.load_latest(run)
    assert any(not torch.equal(net_before[k], v) for k, v in state2["learner"]["net"].items())


def test_the_greedy_evaluation_keeps_each_episodes_state():
    from apexrl.evaluation import evaluate

    cfg = tiny()
    system = assemble(cfg, num_actors=1)
    policy = system.make_eval_policy(system.make_network(), 3, seed=0)
    seen = []
    act = policy.act

    def spy(obs):
        seen.append(len(obs))
        return act(obs)

    policy.act = spy
    returns = evaluate(policy, cfg.env, 3, seed=5)
    assert len(returns) == 3 and set(seen) == {3}, "every step acts on all rows: row i is always episode i"
    assert np.all(np.asarray(returns) >= 1)


def test_apex_trainer_runs_rllibs_r2d2_keys_and_acts_with_a_state_as_rllib_does(tmp_path, monkeypatch):
    from apexrl import ApexTrainer

    monkeypatch.chdir(tmp_path)
    trainer = ApexTrainer(config={
        "env": "ray.rllib.examples.env.stateless_cartpole.StatelessCartPole", "num_workers": 1,
        "model": {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 8, "fcnet_hiddens": [16]},
        "replay_buffer_config": {"replay_burn_in": 4}, "min_time_s_per_iteration": 1,
        "replay": {"learning_starts": 200, "capacity": 5000}, "logging": {"report_interval_s": 0.5}})
    try:
        result = trainer.train()
        assert result["timesteps_total"] > 0 and trainer.cfg.agent == "r2d2"
        state = trainer.get_policy().get_initial_state()
        assert state[0].shape == (32,) and not state[0].any()
        action, state, extra = trainer.compute_single_action(np.array([0.01, -0.02], np.float32), state)
        assert action in (0, 1) and extra == {} and state[0].shape == (32,) and state[0].any()
        again, state2, _ = trainer.compute_single_action(np.array([0.02, -0.03], np.float32), state)
        assert not np.array_equal(state2[0], state[0]), "the state carries on from the one passed in"
    finally:
        trainer.stop()
    assert not ray.is_initialized()
