"""Faults injected for real (processes killed, envs that raise): the run survives or stops cleanly."""

import io
import os
import signal
import threading
import time
from collections.abc import Callable

import numpy as np
import psutil
import pytest
import ray
import torch
from fakes import tiny_config

from apexrl.runtime.driver import TrainingError, train

pytestmark = pytest.mark.timeout(400)


tiny = tiny_config


def _kill_when_running(cls_name: str, after_s: float, killed: list[int],
                       when: Callable[[], bool] = lambda: True) -> threading.Thread:
    """SIGKILL the first live Ray worker process of ``cls_name`` once it exists and ``when()`` holds (a real
    crash at a known point of the run, not at a time a slow host might not have reached)."""
    def body():
        deadline = time.time() + 200
        time.sleep(after_s)
        while time.time() < deadline and not killed:
            if not when():
                time.sleep(0.2)
                continue
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


def _records(run) -> list[dict]:
    import json

    path = run / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _went_on_after(run, restarts_key: str, key: str, by: int) -> Callable[[], bool]:
    """The event that ends a recovery test: ``key`` grew by ``by`` after the first report counting a restart."""
    def cond() -> bool:
        recs = _records(run)
        first = next((r for r in recs if r.get(restarts_key, 0) >= 1), None)
        return first is not None and recs[-1][key] >= first[key] + by
    return cond


def _stop_when(condition, timeout_s: float = 200.0) -> threading.Thread:
    """SIGTERM this process (train() then stops as interrupted, with a final checkpoint) once ``condition()``
    holds: the run ends on an event, not after some seconds that a slow host might not fit the work into."""
    def body():
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if condition():
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.2)
    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


@pytest.mark.compat
def test_a_killed_actor_is_restarted_and_training_goes_on(tmp_path):
    run = tmp_path / "r"
    killed: list[int] = []
    _kill_when_running("ActorWorker", 0.0, killed)

    _stop_when(_went_on_after(run, "actor_restarts", "env_steps", 4_000))
    res = train(tiny(**{"stop.max_time_s": 300}), run_dir=run)
    assert killed, "the test must really kill an actor"
    assert res.stop_reason == "interrupted" and res.learner_updates > 0
    assert _records(run)[-1]["actor_restarts"] >= 1


def test_dpg_survives_a_killed_actor_and_resumes_from_its_checkpoint(tmp_path):
    import json

    from apexrl import checkpoint as ckpt

    dpg = {"agent": "dpg", "env.id": "Pendulum-v1", "replay.learning_starts": 500, "evaluation.interval_s": 1.0,
           "evaluation.episodes": 2}
    run = tmp_path / "r"
    killed: list[int] = []
    _kill_when_running("ActorWorker", 0.0, killed, when=lambda: any(r["learner_updates"] > 0 for r in _records(run)))

    _stop_when(_went_on_after(run, "actor_restarts", "env_steps", 4_000))
    first = train(tiny(**dpg, **{"stop.max_time_s": 300}), run_dir=run)
    assert killed, "the test must really kill an actor"
    assert first.stop_reason == "interrupted"
    records = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["actor_restarts"] >= 1 and first.learner_updates > 0
    assert any("actor1_noise" in r for r in records) and any("eval_return_mean" in r for r in records)
    assert any("actor_loss" in r for r in records)
    _, state = ckpt.load_latest(tmp_path / "r")
    assert state["learner"]["updates"] == first.learner_updates

    # The first run may overshoot its cap by a few sends: ask the resumed one for 4,000 steps beyond it.
    goal = first.env_steps + 4_000
    second = train(tiny(**dpg, **{"stop.max_env_steps": goal}), resume=tmp_path / "r")
    assert second.env_steps >= goal and second.learner_updates > first.learner_updates


def test_a_crash_looping_actor_stops_the_run_with_the_cause():
    # The time limit is far away: the run must give up on its own, after a bounded number of restarts.
    cfg = tiny(**{"env.id": "apexrl.envs.testing:Exploding-v0", "stop.max_time_s": 3600})
    with pytest.raises(TrainingError) as e:
        train(cfg, run_dir=None, runs_root=str(os.environ.get("TMPDIR", "/tmp")) + "/apexrl-crashloop")
    assert "simulated env failure on reset" in str(e.value)
    assert "in a row" in str(e.value)
    assert not ray.is_initialized()


def test_a_killed_replay_shard_is_replaced_and_training_goes_on(tmp_path):
    run = tmp_path / "r"
    killed: list[int] = []
    _kill_when_running("ReplayShardWorker", 0.0, killed,
                       when=lambda: any(r["learner_updates"] > 0 for r in _records(run)))

    _stop_when(_went_on_after(run, "shard_restarts", "env_steps", 10_000))
    res = train(tiny(**{"stop.max_time_s": 300, "replay.num_shards": 2, "checkpoint.every_reports": 2,
                        "checkpoint.replay": True}), run_dir=run)
    assert killed, "the test must really kill a shard"
    assert res.stop_reason == "interrupted"
    records = _records(run)
    assert records[-1]["shard_restarts"] >= 1
    after = [r for r in records if r["shard_restarts"] >= 1]
    assert after[-1]["learner_updates"] > after[0]["learner_updates"], "the learner keeps updating"
    assert records[-1]["replay_size"] > 5_000 // 2, "the learner samples the replacement shard too"


def test_sigterm_writes_a_final_checkpoint_and_exits(tmp_path):
    import subprocess
    import sys

    from apexrl import checkpoint as ckpt

    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.Popen([sys.executable, "-m", "apexrl.cli", "train", "--run-dir", str(run), "--console", "plain",
                          "--set", "actors.num_actors=1", "--set", "replay.learning_starts=200",
                          "--set", "checkpoint.every_reports=0", "--set", "evaluation.interval_s=0"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import json

    def learning() -> bool:  # the event to wait for: a report with learner updates
        path = run / "metrics.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return any(json.loads(x).get("learner_updates", 0) > 0 for x in lines)

    try:
        deadline = time.time() + 180
        while time.time() < deadline and not learning():
            assert p.poll() is None, p.communicate()[1][-2000:]
            time.sleep(0.2)
        assert ckpt.list_checkpoints(run) == [], "periodic checkpoints are off: none before the signal"
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-2000:]
    assert "interrupted" in err or "interrupted" in out
    written = ckpt.list_checkpoints(run)
    assert len(written) == 1, "SIGTERM wrote the final checkpoint"
    path, state = ckpt.load_latest(run)
    assert path == written[0] and path.name in out + err
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    c = state["counters"]
    assert c["env_steps"] == last["env_steps"] > 0  # the final counters, as the final report gave them
    assert state["learner"]["updates"] >= last["learner_updates"] > 0


class _NaNNet(torch.nn.Module):
    """A network whose outputs become NaN: every learner update is non-finite."""

    def __init__(self, obs_space, act_space):
        super().__init__()
        self.lin = torch.nn.Linear(obs_space.shape[0], act_space.n)

    def forward(self, x):
        return self.lin(x.float()) * float("nan")


def test_repeated_non_finite_updates_stop_the_run_and_keep_the_last_good_checkpoint(tmp_path):
    run = tmp_path / "r"
    with pytest.raises(TrainingError, match="in a row had a non-finite loss"):
        train(tiny(**{"learner.max_consecutive_skips": 20, "stop.max_time_s": 600}), run_dir=run,
              model_factory=_NaNNet)
    assert not ray.is_initialized()
    assert (run / "config.yaml").is_file()  # the run started...
    assert not list(run.glob("checkpoints/*.pt"))  # ...and never had a good state to save


class _EvalBreaksNet(torch.nn.Module):
    """Works for actors (batches of 4) and the learner (32); raises on the evaluation's batches (<= 3)."""

    def __init__(self, obs_space, act_space):
        super().__init__()
        self.lin = torch.nn.Linear(obs_space.shape[0], act_space.n)

    def forward(self, x):
        if x.shape[0] <= 3:
            raise RuntimeError("this network cannot be evaluated")
        return self.lin(x.float())


def test_an_evaluation_that_raises_is_logged_and_the_run_keeps_training_and_checkpoints(tmp_path, caplog):
    run = tmp_path / "r"
    res = train(tiny(**{"actors.envs_per_actor": 4, "evaluation.interval_s": 0.5, "evaluation.episodes": 3,
                        "stop.max_env_steps": 4_000}), run_dir=run, model_factory=_EvalBreaksNet)
    assert not ray.is_initialized()
    assert res.env_steps >= 4_000 and res.learner_updates > 0
    assert res.eval_return_mean is None and res.checkpoint is not None and res.checkpoint.exists()
    assert "evaluation failed" in caplog.text and "this network cannot be evaluated" in caplog.text


def test_a_shard_dying_just_before_the_final_checkpoint_does_not_cost_the_checkpoint(tmp_path, topologies, caplog):
    from apexrl import checkpoint as ckpt
    from apexrl.metrics import Console

    made = topologies

    class KillShardThenCtrlC(Console):
        def __init__(self):
            super().__init__("off")
            self.fired = False

        def update(self, record):
            if not self.fired and record["learner_updates"] > 0:
                self.fired = True
                ray.kill(made[0].shards[0], no_restart=True)
                raise KeyboardInterrupt

    run = tmp_path / "r"
    res = train(tiny(**{"checkpoint.replay": True, "stop.max_time_s": 300}), run_dir=run,
                console=KillShardThenCtrlC())
    assert res.stop_reason == "interrupted" and res.checkpoint is not None and res.checkpoint.exists()
    _, state = ckpt.load_latest(run)
    assert state["counters"]["env_steps"] > 0 and state["learner"]["updates"] > 0
    assert "a replay shard did not answer" in caplog.text


def watch_learner_restarts(monkeypatch) -> list[dict]:
    """Filled at each learner restart: what the replacement must start from (the newest publication, the last
    checkpoint's update count) and, before the loop hands it any work, the state it holds."""
    from apexrl import checkpoint as ckpt
    from apexrl.runtime import supervisor as sup

    seen: list[dict] = []
    original = sup.Supervisor.restart_learner

    def watched(self, err, state):
        version, [ref] = ray.get(self.topology.ps.get.remote(-1))
        try:
            published = ray.get(ref, timeout=60)
        except ray.exceptions.ObjectLostError:  # went with its owner, the dead learner: the server's own copy
            published = ray.get(self.topology.ps.backup.remote())[1]
        original(self, err, state)
        if isinstance(state, bytes):  # the last checkpoint file as the learner composed it
            state = ckpt.safe_load(io.BytesIO(state))["learner"]
        seen.append({"published": published, "version": version, "checkpoint_updates":
                     None if state is None else int(state["updates"]),
                     "recovered": ray.get(self.topology.learner.state_dict.remote())})

    monkeypatch.setattr(sup.Supervisor, "restart_learner", watched)
    return seen


def test_a_killed_learner_is_restarted_from_the_newest_weights_and_training_goes_on(tmp_path, monkeypatch):
    seen = watch_learner_restarts(monkeypatch)
    run = tmp_path / "r"
    killed: list[int] = []
    _kill_when_running("LearnerWorker", 0.0, killed,  # once a checkpoint holds learner state to recover from
                       when=lambda: any(r["learner_updates"] > 0 for r in _records(run)[4:]))

    _stop_when(_went_on_after(run, "learner_restarts", "learner_updates", 200))
    res = train(tiny(**{"stop.max_time_s": 300, "evaluation.interval_s": 0.5, "evaluation.episodes": 2,
                        "checkpoint.every_reports": 4}), run_dir=run)
    assert killed, "the test must really kill the learner"
    assert res.stop_reason == "interrupted"
    records = _records(run)
    assert records[-1]["learner_restarts"] >= 1
    first = next(i for i, r in enumerate(records) if r["learner_restarts"] >= 1)
    assert records[-1]["learner_updates"] > records[first]["learner_updates"]  # updates go on after it
    assert res.checkpoint is not None and res.checkpoint.exists()
    assert seen, "the supervisor restarted the learner"
    got = seen[0]
    for k, v in got["published"].items():  # the newest weights, not a fresh random network
        np.testing.assert_array_equal(got["recovered"]["net"][k].numpy(), v, err_msg=k)
    assert got["recovered"]["updates"] == max(got["version"], got["checkpoint_updates"] or 0) > 0


@pytest.mark.compat
def test_a_sigkilled_run_resumes_from_its_newest_checkpoint_and_its_metrics_go_on_from_there(tmp_path):
    import subprocess
    import sys

    from apexrl import checkpoint as ckpt
    from apexrl.cli import main

    run = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-m", "apexrl", "train", "--run-dir", str(run), "--console", "off",
                          "--max-time", "300", "--set", "actors.num_actors=1", "--set", "replay.learning_starts=200",
                          "--set", "checkpoint.every_reports=1", "--set", "logging.report_interval_s=0.5",
                          "--set", "evaluation.interval_s=0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 180
        while time.time() < deadline and len(ckpt.list_checkpoints(run)) < 3:  # the event: 3 checkpoints
            assert p.poll() is None, p.communicate()[1][-2000:]
            time.sleep(0.2)
    finally:
        p.kill()  # SIGKILL: no final checkpoint, no shutdown
        p.wait()
    path, state = ckpt.load_latest(run)
    c = state["counters"]
    assert c["learner_updates"] > 0
    goal = c["env_steps"] + 3_000
    assert main(["train", "--resume", str(run), "--max-env-steps", str(goal), "--console", "off"]) == 0
    recs = _records(run)
    old = [r for r in recs if r["env_steps"] <= c["env_steps"]]
    new = recs[len(old):]
    assert new and all(r["env_steps"] > c["env_steps"] for r in new), "lines after the checkpoint were dropped"
    assert new[-1]["env_steps"] >= goal
    for key in ("env_steps", "learner_updates", "time_s"):  # one continuous curve across the crash
        values = [r[key] for r in recs]
        assert values == sorted(values), key
    assert new[0]["learner_updates"] >= c["learner_updates"] and new[0]["time_s"] >= c["time_s"]


def test_a_learner_whose_parameter_server_went_too_ends_the_run_in_one_line(ray_local):
    """When Ray gives up on the driver (a cluster that lost sight of it), every role goes at once: the
    learner's restart finds the parameter server dead, and says so instead of a traceback."""
    from types import SimpleNamespace

    from apexrl.metrics import Console
    from apexrl.runtime import supervisor as sup
    from apexrl.runtime.progress import Progress

    @ray.remote
    class Gone:
        def get(self, version):
            return None

    ps = Gone.remote()
    ray.kill(ps)
    topology = SimpleNamespace(num_actors=1, learner=None, ps=ps, evaluator=None)
    s = sup.Supervisor(topology, Progress(num_actors=1), Console("off"))
    with pytest.raises(sup.TrainingError, match=r"^the learner failed \(.*\) and the parameter server with it"):
        s.restart_learner(RuntimeError("its process died"), None)
