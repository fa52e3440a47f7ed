"""The command line: bad input gets one clear line on stderr, exit status 2, and no run dir."""

import os
import subprocess
import sys

import pytest

from apexrl.cli import main


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_cli(args, capsys):
    code = main(args)
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("args, fragment", [
    (["train", "--set", "learner.lrr=1e-3"], "did you mean 'learner.lr'"),
    (["train", "--set", "learner.lr=-1"], "learner.lr"),
    (["train", "--set", "replay.alpha=2"], "replay.alpha"),
    (["train", "--set", "replay.capacity=8", "--set", "replay.learning_starts=8"], "learner.batch_size"),
    (["train", "--set", "env.id=CartPol-v1"], "did you mean CartPole-v1"),
    (["train", "--set", "env.id=MountainCarContinuous-v0"], "set agent=dpg"),
    (["train", "--set", "agent=dpg"], "needs a continuous (Box) one"),
    (["train", "--config", "pendulum", "--set", "agent=dqn"], "set agent=dpg"),
    (["train", "--config", "pendulum", "--set", "network.kind=nature_cnn"], "network.kind"),
    (["train", "--config", "pendulum", "--set", "dpg.noise_min=0.9"], "dpg.noise_min"),
    (["train", "--config", "nope.yaml"], "not found"),
    (["train", "--resume", "runs/missing"], "not a run dir"),
    (["eval", "missing.pt"], "does not exist"),
    (["train", "--address", "127.0.0.1:1"], "cannot reach a Ray cluster"),
    (["train", "--set", "env.vector=cpp"], "env.vector"),
    (["train", "--set", "env.id=apexrl.envs.testing:MisShaped-v0"],
     "env 'apexrl.envs.testing:MisShaped-v0' returned an observation of shape (8,) float32 at reset; its "
     "observation_space says Box("),
    (["train", "--set", "env.vector=ale"], "cannot step 'CartPole-v1': it is not an Atari env"),
    (["train", "--set", "actors.precision=fp16"], "actors.precision"),
    (["train", "--config", "pendulum", "--set", "actors.device=cuda"], "actors.device"),
    (["train", "--set", "actors.num_gpus=0.5", "--set", "actors.num_actors=1"], "actors.num_gpus"),
])
def test_bad_input_is_one_line_exit_2_and_no_run_dir(args, fragment, capsys, in_tmp):
    code, err = run_cli(args, capsys)
    assert code == 2
    assert fragment in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (in_tmp / "runs").exists()


def test_malformed_yaml_names_the_line(capsys, in_tmp):
    (in_tmp / "bad.yaml").write_text("learner:\n  lr: [1\n")
    code, err = run_cli(["train", "--config", "bad.yaml"], capsys)
    assert code == 2 and "bad.yaml" in err and "line" in err


def test_damaged_checkpoint_is_reported(capsys, in_tmp):
    (in_tmp / "broken.pt").write_bytes(b"not a checkpoint")
    code, err = run_cli(["eval", "broken.pt"], capsys)
    assert code == 2 and "cannot be read" in err


def test_debug_shows_the_traceback(in_tmp):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.run([sys.executable, "-m", "apexrl.cli", "--debug", "train", "--set", "learner.lr=-1"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode != 0 and "Traceback" in p.stderr


@pytest.mark.timeout(300)
def test_train_then_eval_through_the_cli(capsys, in_tmp):
    code = main(["train", "--max-env-steps", "1500", "--console", "plain", "--name", "t",
                 "--set", "actors.num_actors=1", "--set", "replay.learning_starts=200",
                 "--set", "network.torso=[32]", "--set", "network.head=32", "--set", "evaluation.interval_s=0",
                 "--set", "logging.report_interval_s=0.5"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "done:" in out.out
    run = in_tmp / "runs" / "t"
    assert (run / "config.yaml").exists() and (run / "metrics.jsonl").exists()
    code = main(["eval", str(run), "--episodes", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "return mean" in out
    code = main(["runs"])
    assert code == 0 and "t " in capsys.readouterr().out


def test_an_env_whose_package_is_missing_is_one_line_naming_the_extra(capsys, in_tmp, monkeypatch):
    import gymnasium as gym

    def make(*a, **k):
        raise ModuleNotFoundError("No module named 'mujoco'")

    monkeypatch.setattr(gym, "make", make)
    code, err = run_cli(["train", "--config", "pendulum", "--set", "env.id=HalfCheetah-v5"], capsys)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "pip install 'apexrl[mujoco]'" in err
    assert not (in_tmp / "runs").exists()


RLLIB_FILE = """\
# RLlib's experiment-file format: two experiments, run in turn
small:
    env: CartPole-v1
    run: APEX
    stop:
        timesteps_total: 1500
    config:
        framework: tf
        num_workers: 1
        model: {fcnet_hiddens: [32]}
        hiddens: [32]
        replay_buffer_config: {learning_starts: 200}
        evaluation_interval: 0
        min_time_s_per_iteration: 0.5
learns:
    env: CartPole-v0
    run: APEX
    stop:
        episode_reward_mean: 40
        timesteps_total: 100000
    config:
        num_workers: 1
        num_envs_per_worker: 8
        min_time_s_per_iteration: 0.5
"""


@pytest.mark.timeout(300)
def test_an_rllib_experiment_file_runs_each_experiment_to_its_own_stop(capsys, caplog, in_tmp):
    (in_tmp / "apex.yaml").write_text(RLLIB_FILE)
    code = main(["train", "--config", "apex.yaml", "--run-dir", "out", "--console", "plain"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "experiment small:" in out.out and "experiment learns:" in out.out
    assert "reached 1,500 env steps" in out.out
    assert "training mean" in out.out and ">= target 40" in out.out  # RLlib's episode_reward_mean criterion
    assert (in_tmp / "out" / "small" / "config.yaml").exists() and (in_tmp / "out" / "learns" / "config.yaml").exists()
    assert "framework (apexrl runs PyTorch" in caplog.text


def test_an_rllib_key_apexrl_cannot_honour_is_one_line_exit_2_and_no_run_dir(capsys, in_tmp):
    (in_tmp / "rainbow.yaml").write_text("rainbow:\n  env: CartPole-v1\n  run: APEX\n  config:\n"
                                         "    framework: tf\n    lr_schedule: [[0, 0.001]]\n")
    code, err = run_cli(["train", "--config", "rainbow.yaml"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "RLlib key 'lr_schedule' = [[0, 0.001]] is not supported: learning-rate schedules" in err
    assert not (in_tmp / "runs").exists()
