"""A user's broken env gets one line: at start-up when its spaces lie, in the run when it returns NaN."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from apexrl.envs.contract import check_spaces_hold, first_non_finite


class _Env(gym.Env):
    def __init__(self, obs, reward=0.0):
        self.observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._obs, self._reward = obs, reward

    def reset(self, *, seed=None, options=None):
        return self._obs, {}

    def step(self, action):
        return self._obs, self._reward, False, False, {}


@pytest.mark.parametrize("obs, reward, fragment", [
    (np.zeros(2, np.float32), 0.0, None),
    (np.zeros(3, np.float32), 0.0, "an observation of shape (3,) float32 at reset"),
    (np.array([0.0, np.nan], np.float32), 0.0, "a non-finite observation (nan) at reset"),
    (np.array([0.0, 2.0], np.float32), 0.0, "outside its bounds (element 1: 2.0 not in [-1.0, 1.0])"),
    (np.zeros(2, np.float32), float("inf"), "a non-finite reward (inf) after a step"),
    (np.zeros(2, np.float32), "1", "a reward of type str"),
])
def test_start_up_check_names_what_the_env_returned_and_what_its_space_says(obs, reward, fragment):
    problem = check_spaces_hold("my:Env-v0", _Env(obs, reward))
    if fragment is None:
        assert problem is None
    else:
        assert problem.startswith("env 'my:Env-v0' returned ") and fragment in problem


def test_the_actors_check_finds_the_first_bad_slot():
    obs = np.zeros((3, 4), np.float32)
    assert first_non_finite(np.zeros(3), obs) is None
    assert first_non_finite(np.array([0.0, np.nan, np.inf]), obs)[:2] == ("reward", 1)
    obs[2, 3] = -np.inf
    what, slot, value = first_non_finite(np.zeros(3), obs)
    assert (what, slot, value) == ("observation", 2, -np.inf)
    assert first_non_finite(np.zeros(2), np.full((2, 4, 4), 255, np.uint8)) is None  # ints are always finite


def test_a_nan_reward_stops_the_run_with_one_line_after_a_final_checkpoint(tmp_path):
    env = {k: v for k, v in os.environ.items()}
    cmd = [sys.executable, "-m", "apexrl", "train", "--set", "env.id=apexrl.envs.testing:NaNReward-v0",
           "--set", "actors.num_actors=1", "--set", "actors.envs_per_actor=2", "--set", "replay.learning_starts=200",
           "--set", "stop.max_time_s=120", "--console", "plain", "--run-dir", str(tmp_path / "run")]
    res = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    lines = [x for x in out.splitlines() if "non-finite" in x]
    assert len(lines) == 1, out
    assert ("apexrl: training stopped: env 'apexrl.envs.testing:NaNReward-v0' returned a non-finite reward (nan) "
            "in actor 0, env slot") in lines[0]
    assert "final checkpoint: " in lines[0] and "Traceback" not in out
    ckpt = lines[0].split("final checkpoint: ")[1].strip()
    assert os.path.exists(ckpt)
    for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines():  # strict JSON
        json.loads(line, parse_constant=lambda t: (_ for _ in ()).throw(ValueError(t)))


def test_with_non_finite_drop_the_run_goes_on_and_says_so_at_most_once_per_report(tmp_path):
    cmd = [sys.executable, "-m", "apexrl", "train", "--set", "env.id=apexrl.envs.testing:NaNReward-v0",
           "--set", "env.non_finite=drop", "--set", "actors.num_actors=1", "--set", "actors.envs_per_actor=2",
           "--set", "replay.learning_starts=200", "--set", "logging.report_interval_s=1", "--max-env-steps", "6000",
           "--console", "plain", "--run-dir", str(tmp_path / "run")]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "reached 6,000 env steps" in out, out
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    said = [x for x in out.splitlines() if "non-finite reward or observation" in x]
    assert 1 <= len(said) <= len(records)  # one line per report at most, not one per NaN
    last = records[-1]
    assert last["nonfinite_env_steps"] == 2 * (last["env_steps"] // 2 // 50)  # each of 2 envs: every 50th step
    assert last["nonfinite_env_steps"] <= last["nonfinite_dropped"] <= 3 * last["nonfinite_env_steps"]  # n = 3
    assert all(r["train_return_mean"] is None or math.isfinite(r["train_return_mean"]) for r in records)
