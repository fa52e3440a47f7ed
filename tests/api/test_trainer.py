"""``ApexTrainer`` in RLlib's shape: iterations of the running system with RLlib's result names, save,
restore into a fresh trainer, actions from the newest weights, a clear error for GPUs the cluster lacks."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import ray

from apexrl import ApexTrainer
from apexrl.checkpoint import load_latest
from apexrl.config import ConfigError

pytestmark = pytest.mark.timeout(300)

CONFIG = {  # the article's keys, plus what keeps the run small
    "env": "CartPole-v1", "num_workers": 2, "framework": "torch", "lr": 1e-3, "train_batch_size": 32,
    "rollout_fragment_length": 64, "min_time_s_per_iteration": 2,
    "network": {"torso": [32], "head": 32}, "replay": {"learning_starts": 200, "capacity": 5000},
    "evaluation": {"interval_s": 0.5, "episodes": 2}, "logging": {"report_interval_s": 0.5},
}
RESULT_KEYS = ("episode_reward_mean", "episode_reward_min", "episode_reward_max", "episode_len_mean",
               "episodes_total", "timesteps_total", "training_iteration", "time_total_s", "time_this_iter_s",
               "info/learner/updates", "info/learner/loss", "info/learner/q_mean")


def test_iterations_save_restore_and_act(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trainer = ApexTrainer(config=CONFIG)
    try:
        first, second = trainer.train(), trainer.train()
        assert [first["training_iteration"], second["training_iteration"]] == [1, 2]
        assert 0 < first["timesteps_total"] < second["timesteps_total"]
        assert first["time_this_iter_s"] >= 2.0 and second["time_total_s"] >= 4.0
        for k in RESULT_KEYS:
            assert k in second, k
        assert second["info/learner/updates"] > 0 and not math.isnan(second["episode_reward_mean"])
        assert "evaluation/episode_reward_mean" in second  # evaluated every 0.5 s
        # Its private Ray's processes (actors, learner, shard, Ray's servers) hold more than this one alone.
        assert 150 < second["info/memory_mb"] <= second["info/peak_memory_mb"] < 20_000
        saved = trainer.save()
        path = saved.checkpoint.path  # Tune's result: a checkpoint directory
        assert trainer.compute_single_action(np.zeros(4, np.float32)) in (0, 1)
        assert trainer.compute_single_action(np.zeros(4, np.float32), explore=True) in (0, 1)
        assert set(trainer.get_weights()) == set(trainer.get_policy().state_dict())
    finally:
        trainer.stop()
    assert not ray.is_initialized(), "stop() shuts down the Ray the trainer started"
    _, state = load_latest(Path(path))
    saved = state["counters"]

    fresh = ApexTrainer(config=CONFIG)
    try:
        fresh.restore(path)
        result = fresh.train()
        assert result["timesteps_total"] > saved["env_steps"]
        assert result["info/learner/updates"] >= saved["learner_updates"]
    finally:
        fresh.stop()


def test_more_gpus_than_the_cluster_has_is_a_config_error_and_nothing_is_left_running(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="learner.num_gpus"):
        ApexTrainer(config={**CONFIG, "num_gpus": 1})
    assert not ray.is_initialized()


def test_the_articles_train_py_runs_on_apexrl(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "rllib_style" / "train.py"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, str(script), "2"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Iteration: 0, reward: ") and lines[-1].startswith("Iteration: 1, reward: ")
    assert any(line.startswith("Checkpoint saved at ") and "path=" in line for line in lines)  # Tune's result


@pytest.mark.slow  # ~90 s: two trials one after the other (the default suite keeps test_a_trial_reserves_...)
def test_the_issue_tune_program_runs_both_trials_on_a_2_cpu_ray_and_picks_the_learning_rate(
        tmp_path, monkeypatch, ray_local):
    """A 2-CPU laptop's Tune + ASHA program: each trial reserves its learner and actor, so the trials take
    turns instead of waiting forever for CPUs held by the other."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    monkeypatch.chdir(tmp_path)
    space = {"env": "CartPole-v1", "num_workers": 1, "lr": tune.grid_search([2e-3, 1e-5]),
             "evaluation": {"interval_s": 0}, "logging": {"report_interval_s": 1.0}}
    tuner = tune.Tuner(
        ApexTrainer, param_space=space,
        tune_config=tune.TuneConfig(scheduler=ASHAScheduler(metric="episode_reward_mean", mode="max", max_t=8,
                                                            grace_period=8)),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "tune"), stop={"training_iteration": 8},
                                  checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True)))
    results = tuner.fit()
    assert len(results) == 2 and not results.errors
    assert all(r.metrics["training_iteration"] == 8 for r in results)
    best = results.get_best_result(metric="episode_reward_mean", mode="max")
    assert best.config["lr"] == 2e-3, [(r.config["lr"], r.metrics["episode_reward_mean"]) for r in results]
    _, state = load_latest(Path(best.checkpoint.path))
    assert state["counters"]["env_steps"] > 0 and state["learner"]["updates"] > 0


def test_a_trial_reserves_its_learner_and_each_actor_and_nothing_for_its_driver():
    request = ApexTrainer.default_resource_request({"env": "CartPole-v1", "num_workers": 3})
    assert request.head_bundle_is_empty
    assert request.bundles == [{"CPU": 1.0}] * 4  # learner + 3 actors


STILL = {**CONFIG, "num_workers": 1, "min_time_s_per_iteration": 1, "evaluation": {"interval_s": 0}}
DPG_STILL = {"env": "Pendulum-v1", "tau": 0.005, "num_workers": 1, "min_time_s_per_iteration": 1,
             "replay": {"learning_starts": 200, "capacity": 5000}, "network": {"torso": [32]},
             "evaluation": {"interval_s": 0}, "logging": {"report_interval_s": 0.5}}


@pytest.mark.parametrize("config,states", [
    (STILL, np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)),
    (DPG_STILL, np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)),
], ids=["dqn", "dpg"])
def test_between_train_calls_the_trainer_holds_still_and_a_restored_one_acts_as_the_saved_one(
        tmp_path, monkeypatch, config, states):
    monkeypatch.chdir(tmp_path)
    trainer = ApexTrainer(config=config)
    try:
        while trainer.train()["info/learner/updates"] == 0:
            pass
        result = trainer.train()
        weights = trainer.get_weights()
        actions = [trainer.compute_single_action(s) for s in states]
        counters = (result["timesteps_total"], result["info/learner/updates"])
        time.sleep(3)  # an RLlib user's pause between calls
        assert _same(trainer.get_weights(), weights)
        np.testing.assert_array_equal([trainer.compute_single_action(s) for s in states], actions)
        path = trainer.save().checkpoint.path
        _, state = load_latest(Path(path))
        assert (state["counters"]["env_steps"], state["counters"]["learner_updates"]) == counters
        assert _same(state["learner"]["net"], weights)
    finally:
        trainer.stop()
    fresh = ApexTrainer(config=config)
    try:
        fresh.restore(path)
        assert _same(fresh.get_weights(), weights)
        np.testing.assert_array_equal([fresh.compute_single_action(s) for s in states], actions)
    finally:
        fresh.stop()


def _same(a: dict, b: dict) -> bool:
    return set(a) == set(b) and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


CARTPOLE_FILE_CONFIG = {  # the config of RLlib's cartpole-apex-dqn.yaml
    "framework": "tf", "num_workers": 3, "optimizer": {"num_replay_buffer_shards": 2},
    "replay_buffer_config": {"type": "MultiAgentPrioritizedReplayBuffer", "capacity": 20000,
                             "min_size_for_sampling": 1000},
    "num_gpus": 0, "min_time_s_per_iteration": 5, "target_network_update_freq": 500,
    "min_sample_timesteps_per_iteration": 1000, "training_intensity": 4}
PENDULUM_FILE_CONFIG = {  # the config of RLlib's pendulum-apex-ddpg.yaml, as a user passes it on
    "framework": "torch", "use_huber": True, "clip_rewards": False, "num_workers": 16, "n_step": 1,
    "target_network_update_freq": 50000, "tau": 1.0, "evaluation_interval": 5, "evaluation_duration": 10}
MOUNTAINCAR_FILE_CONFIG = {  # ... and of mountaincarcontinuous-apex-ddpg.yaml
    "framework": "torch", "clip_rewards": False, "num_workers": 16, "exploration_config": {"ou_base_scale": 1.0},
    "n_step": 3, "target_network_update_freq": 50000, "tau": 1.0, "evaluation_interval": 5,
    "evaluation_duration": 10}


@pytest.mark.parametrize("env,config", [("CartPole-v0", CARTPOLE_FILE_CONFIG), ("Pendulum-v1", PENDULUM_FILE_CONFIG),
                                        ("MountainCarContinuous-v0", MOUNTAINCAR_FILE_CONFIG)],
                         ids=["cartpole", "pendulum", "mountaincar"])
def test_an_rllib_tuned_example_config_dict_trains_in_the_trainer(tmp_path, monkeypatch, env, config):
    monkeypatch.chdir(tmp_path)
    trainer = ApexTrainer(config={**config, "env": env, "min_time_s_per_iteration": 2,
                                  "replay": {"learning_starts": 500}})
    try:
        if env.startswith("CartPole"):
            assert trainer.cfg.agent == "dqn" and trainer.cfg.replay.num_shards == 2
        else:
            assert trainer.cfg.agent == "dpg" and trainer.cfg.dpg.twin_critics is False  # APEX_DDPG, not TD3
            assert trainer.cfg.dpg.noise == ("ou" if "exploration_config" in config else "gaussian")
        result = trainer.train()
        for _ in range(30):  # MountainCar's episodes are 999 steps: the first ones end after a few iterations
            if result["info/learner/updates"] > 0 and not math.isnan(result["episode_reward_mean"]):
                break
            result = trainer.train()
        assert result["timesteps_total"] > 500 and result["info/learner/updates"] > 0
        assert not math.isnan(result["episode_reward_mean"])
    finally:
        trainer.stop()
