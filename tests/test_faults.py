"""Faults injected for real (processes killed, envs that raise): the run survives or stops cleanly."""

import os
import signal
import threading
import time

import psutil
import pytest
import ray

from apexrl.config import Config
from apexrl.runtime.driver import TrainingError, train

pytestmark = pytest.mark.timeout(400)


def tiny(**over):
    base = {"actors.num_actors": 2, "actors.envs_per_actor": 2, "actors.send_every": 32,
            "network.hidden_sizes": [32, 32], "learner.batch_size": 32, "replay.capacity": 5_000,
            "replay.learning_starts": 200, "evaluation.interval_s": 0, "logging.report_interval_s": 0.5,
            "logging.console": "off", "checkpoint.every_reports": 0}
    base.update(over)
    return Config().replace(**base)


def _kill_when_running(cls_name: str, after_s: float, killed: list[int]) -> threading.Thread:
    """SIGKILL the first live Ray worker process of ``cls_name`` once it exists (a real crash)."""
    def body():
        deadline = time.time() + 120
        time.sleep(after_s)
        while time.time() < deadline and not killed:
            for p in psutil.Process().children(recursive=True):  # only this test's own Ray
                try:
                    title = " ".join(p.cmdline())
                except (psutil.Error, OSError):
                    continue
                if title.startswith(f"ray::{cls_name}"):
                    os.kill(p.pid, signal.SIGKILL)
                    killed.append(p.pid)
                    return
            time.sleep(0.5)
    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


def test_a_killed_actor_is_restarted_and_training_goes_on(tmp_path):
    killed: list[int] = []
    _kill_when_running("ActorWorker", 3.0, killed)
    res = train(tiny(**{"stop.max_env_steps": 8_000}), run_dir=tmp_path / "r")
    assert killed, "the test must really kill an actor"
    assert res.env_steps >= 8_000 and res.learner_updates > 0
    import json
    last = json.loads((tmp_path / "r" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["actor_restarts"] >= 1


def test_a_crash_looping_actor_stops_the_run_with_the_cause():
    # The time limit is far away: the run must give up on its own, after a bounded number of restarts.
    cfg = tiny(**{"env.id": "apexrl.envs.testing:Exploding-v0", "stop.max_time_s": 3600})
    with pytest.raises(TrainingError) as e:
        train(cfg, run_dir=None, runs_root=str(os.environ.get("TMPDIR", "/tmp")) + "/apexrl-crashloop")
    assert "simulated env failure on reset" in str(e.value)
    assert "in a row" in str(e.value)
    assert not ray.is_initialized()
