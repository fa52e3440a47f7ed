"""The article's `train.py`, with its config (lr 1e-4, train_batch_size 500, 8 workers) on a `ray start --head`
cluster as current Ray starts one (token authentication on, from the token file on the machine), 2 CPUs:
it learns CartPole to a training reward of 150, saves, and `restore.py` continues in a fresh trainer.
Slow (a few minutes):

    python -m pytest -m slow tests/api/test_article_on_cluster.py -s
"""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.raystart import free_port, start_head

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rllib_style"
ITERATIONS = 120  # 5 s each: 10 minutes at most


def test_articles_train_py_reaches_150_on_a_token_cluster_and_restores(tmp_path):
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))  # what any earlier ray.init leaves
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH") and k != "RAY_ADDRESS"}
    env.update(HOME=str(home), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    port = free_port()
    head = start_head(tmp_path, port, num_cpus=2, env=env)
    try:
        assert "Token authentication is enabled" in (tmp_path / "head.log").read_text()
        env["RAY_ADDRESS"] = "auto"  # the cluster this host started last, as the example says; a script that
        # passes HOST:PORT to ray.init itself needs RAY_AUTH_MODE=token (Ray sends a token only for "auto")
        train = subprocess.Popen([sys.executable, str(EXAMPLE / "train.py"), str(ITERATIONS)], cwd=tmp_path, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        rewards, checkpoint, reached = [], None, False
        for line in train.stdout:
            print(line, end="")
            if m := re.match(r"Iteration: (\d+), reward: ([-\d.na]+)", line):
                rewards.append(float(m.group(2)))  # nan until the first episode ends
                reached = reached or rewards[-1] >= 150
            if m := re.search(r"Checkpoint saved at .*path=([^,)]+)", line):
                checkpoint = m.group(1)
                if reached:
                    break  # a save after the reward reached 150
        train.terminate()
        train.wait(timeout=120)
        assert reached and checkpoint, f"training rewards {rewards}"

        out = subprocess.run([sys.executable, str(EXAMPLE / "restore.py"), checkpoint, "2"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
        print(out.stdout)
        assert out.returncode == 0, out.stderr[-3000:]
        restored = int(re.search(r"Restored at (\d+) env steps; action for a zero observation: [01]", out.stdout)[1])
        steps = [int(x) for x in re.findall(r"timesteps: (\d+)", out.stdout)]
        assert restored > 0 and steps and steps[0] > restored  # trains on from the saved step count
    finally:
        head.stop()
