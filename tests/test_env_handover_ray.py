"""Envs handed over in Python train in a real Ray run and resume: a dotted class path with env_config (the
maze counts illegal actions in a file, so no actor process can hide one), a register_env name, a lambda."""

import pytest
import ray
import yaml
from fakes import tiny_config

from apexrl import checkpoint as ckpt
from apexrl.config import load
from apexrl.envs import EnvSpecError
from apexrl.runtime.driver import train

pytestmark = pytest.mark.timeout(300)


def test_a_class_path_with_env_config_trains_resumes_and_never_takes_an_illegal_action(tmp_path):
    log = tmp_path / "illegal.txt"
    cfg = tiny_config(**{"env.id": "apexrl.envs.maze.MaskedMaze", "env_config": {"illegal_log": str(log)},
                         "stop.max_env_steps": 6_000, "actors.eps_base": 1.0, "evaluation.interval_s": 0.5,
                         "evaluation.episodes": 3})
    run = tmp_path / "run"
    first = train(cfg, run_dir=run)
    assert first.env_steps >= 6_000 and first.learner_updates > 0
    saved = yaml.safe_load((run / "config.yaml").read_text())["env"]
    assert saved["id"] == "apexrl.envs.maze.MaskedMaze" and saved["kwargs"] == {"illegal_log": str(log)}
    more = first.env_steps + 3_000
    second = train(load(run / "config.yaml", [f"stop.max_env_steps={more}"]), resume=run)  # as --resume does
    assert second.env_steps >= more and second.learner_updates > first.learner_updates
    assert not log.exists(), f"illegal actions taken: {log.read_text() if log.exists() else ''}"
    assert not ray.is_initialized()


def test_a_register_env_name_and_a_lambda_train_and_resume(tmp_path):
    from gymnasium.envs.classic_control import CartPoleEnv
    from ray.tune.registry import register_env

    register_env("handover_cartpole", lambda env_config: CartPoleEnv(render_mode=env_config.get("render_mode")))
    run = tmp_path / "named"
    first = train(tiny_config(**{"env.id": "handover_cartpole", "stop.max_env_steps": 3_000}), run_dir=run)
    more = first.env_steps + 2_000  # a run overshoots its budget by up to a chunk of work
    second = train(load(run / "config.yaml", [f"stop.max_env_steps={more}"]), resume=run)
    assert second.env_steps >= more

    run = tmp_path / "lambda"
    creator = lambda env_config: CartPoleEnv()  # noqa: E731
    import dataclasses

    cfg = tiny_config(**{"stop.max_env_steps": 3_000})
    cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, id="<lambda>", creator=creator))
    first = train(cfg, run_dir=run)
    with pytest.raises(EnvSpecError, match="pass it again"):
        train(load(run / "config.yaml"), resume=run)  # config.yaml alone cannot rebuild a lambda
    more = first.env_steps + 2_000
    second = train(cfg.replace(**{"stop.max_env_steps": more}), resume=run)  # the caller passes it again
    _, state = ckpt.load_latest(run)
    assert state["counters"]["env_steps"] == second.env_steps >= more


def test_apex_trainer_takes_an_env_class_with_env_config(tmp_path, monkeypatch):
    from apexrl import ApexTrainer
    from apexrl.envs.maze import MaskedMaze

    monkeypatch.chdir(tmp_path)
    log = tmp_path / "illegal.txt"
    trainer = ApexTrainer(config={"env": MaskedMaze, "env_config": {"illegal_log": str(log)}, "num_workers": 1,
                                  "min_time_s_per_iteration": 2, "train_batch_size": 32,
                                  "replay": {"learning_starts": 200, "capacity": 5000}})
    try:
        result = trainer.train()
        assert result["timesteps_total"] > 0
        env = MaskedMaze()
        obs, _ = env.reset(seed=3)
        for _ in range(20):  # the raw Dict observation is packed for the policy; its mask is obeyed
            action = trainer.compute_single_action(obs)
            assert obs["action_mask"][action] == 1
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                obs, _ = env.reset()
    finally:
        trainer.stop()
    assert not log.exists()


@pytest.mark.slow
def test_tune_trials_take_an_env_class_and_a_register_env_name(tmp_path, monkeypatch, ray_local):
    """Under Tune, the class (or the creator behind a name registered before the trials) travels to each trial's
    learner, actors and evaluation; the maze's own count proves no trial's actor took an illegal action."""
    from ray import tune
    from ray.tune.registry import register_env

    from apexrl import ApexTrainer
    from apexrl.envs.maze import MaskedMaze

    monkeypatch.chdir(tmp_path)
    log = tmp_path / "illegal.txt"
    register_env("tune_maze", lambda env_config: MaskedMaze(env_config))
    space = {"env": tune.grid_search([MaskedMaze, "tune_maze"]), "env_config": {"illegal_log": str(log)},
             "num_workers": 1, "evaluation": {"interval_s": 1, "episodes": 3}, "logging": {"report_interval_s": 1.0},
             "replay": {"learning_starts": 200}}
    tuner = tune.Tuner(ApexTrainer, param_space=space,
                       run_config=tune.RunConfig(storage_path=str(tmp_path / "tune"), stop={"training_iteration": 3}))
    results = tuner.fit()
    assert len(results) == 2 and not results.errors
    assert all(r.metrics["timesteps_total"] > 0 for r in results)
    assert not log.exists()
