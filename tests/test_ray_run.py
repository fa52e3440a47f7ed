"""A real Ray run (2 actors, 1 shard): it trains, writes its outputs, checkpoints, and resumes."""

import json

import pytest
import ray
import torch
from fakes import tiny_config

from apexrl import checkpoint as ckpt
from apexrl.replay.shard import ReplayShard
from apexrl.runtime.driver import train

pytestmark = pytest.mark.timeout(300)


def tiny(**over):
    return tiny_config(**{"evaluation.interval_s": 0.5, "evaluation.episodes": 2, "checkpoint.every_reports": 2,
                          "checkpoint.replay": True, "stop.max_env_steps": 30_000, **over})


@pytest.mark.compat
def test_two_actors_train_checkpoint_and_resume(tmp_path):
    run = tmp_path / "run"
    # Reports (and so checkpoints) 5 times a second: numpy actors may reach 30k steps in ~1.5 s.
    first = train(tiny(**{"logging.report_interval_s": 0.2}), run_dir=run)
    assert not ray.is_initialized(), "train() shuts down the Ray it started"
    assert first.env_steps == 30_000 and first.learner_updates > 0, "the budget is met, not overshot"
    assert (run / "config.yaml").exists() and list((run / "tb").iterdir())
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for key in ("time_s", "env_steps", "learner_updates", "train_return_mean", "env_steps_per_s", "updates_per_s"):
        assert key in records[-1]
    assert any("eval_return_mean" in r for r in records)
    assert any("actor1_epsilon" in r for r in records)

    path, state = ckpt.load_latest(run)
    assert path == first.checkpoint
    assert len(ckpt.list_checkpoints(run)) >= 2, "periodic checkpoints were written during the run, not only at its end"
    for kept in ckpt.list_checkpoints(run):  # periodic ones too: actors held while replay and learner were taken
        saved = ckpt.safe_load(kept)
        inserted = sum(int(s["inserted"]) for s in saved["replay"])
        assert inserted == saved["counters"]["transitions_sent"] > 0, f"{kept.name}: replay and counters of one moment"
        assert saved["counters"]["learner_updates"] == saved["learner"]["updates"]
    c = state["counters"]
    assert c["env_steps"] == first.env_steps and c["learner_updates"] == first.learner_updates
    shard = ReplayShard(5_000)
    shard.load_state_dict(state["replay"][0])
    saved_size = len(shard.buffer)
    assert saved_size > 1_000
    net_before = {k: v.clone() for k, v in state["learner"]["net"].items()}

    second = train(tiny(**{"stop.max_env_steps": 40_001}), resume=run)
    assert second.env_steps == 40_002, "met, and overshot by less than one vector step (2 envs)"
    assert second.learner_updates >= first.learner_updates
    after = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r["env_steps"] for r in after]
    assert steps == sorted(steps), "metrics continue in the same file without repeats"
    resumed = [r for r in after if r["env_steps"] > first.env_steps]
    assert resumed and resumed[0]["learner_updates"] >= first.learner_updates
    sizes = [r["replay_size"] for r in resumed if r["replay_size"] is not None]
    assert sizes and sizes[0] >= saved_size, "replay restored, not restarted empty"
    _, state2 = ckpt.load_latest(run)
    assert state2["counters"]["env_steps"] == second.env_steps
    assert any(not torch.equal(net_before[k], v) for k, v in state2["learner"]["net"].items())


@pytest.mark.compat
def test_apexrl_train_reaches_cartpoles_target_as_a_user_runs_it(tmp_path):
    """The README's first command, from a shell with no Ray settings: CartPole-v1 to a greedy 475."""
    import subprocess
    import sys

    from apexrl.bench.overhead import user_env

    out = subprocess.run([sys.executable, "-m", "apexrl", "train", "--target-return", "475", "--max-time", "240",
                          "--console", "plain", "--run-dir", str(tmp_path / "run")], env=user_env(), cwd=tmp_path,
                         capture_output=True, text=True, timeout=280)
    said = out.stdout + out.stderr  # the console writes to stderr
    assert out.returncode == 0, said[-3000:]
    assert "stopping: evaluation mean" in said and ">= target 475" in said, said[-2000:]
    assert "Traceback" not in said
    assert (tmp_path / "run" / "checkpoints" / "best.pt").exists()


def test_resume_with_an_incompatible_network_is_a_clear_error(tmp_path):
    from apexrl.checkpoint import CheckpointError

    run = tmp_path / "run"
    train(tiny(**{"stop.max_env_steps": 3_000, "evaluation.interval_s": 0}), run_dir=run)
    with pytest.raises(CheckpointError, match="does not fit this config's network"):
        train(tiny(**{"stop.max_env_steps": 6_000, "network.torso": [16], "network.head": 16}), resume=run)
    assert not ray.is_initialized()


def test_an_annealed_epsilon_follows_the_runs_env_steps_and_a_resumed_run_goes_on_from_its_count(tmp_path):
    run = tmp_path / "run"
    over = {"actors.eps_anneal_steps": 8_000, "actors.eps_start": 1.0, "actors.eps_alpha": 0.0,
            "actors.eps_base": 0.05, "evaluation.interval_s": 0, "checkpoint.replay": False}
    first = train(tiny(**over, **{"stop.max_env_steps": 3_000}), run_dir=run)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # Each report: the actors' epsilon as of the driver's count when their last chunk started, 1 -> 0.05.
    eps = [r["actor0_epsilon"] for r in records if "actor0_epsilon" in r]
    # (How far the first report got depends on the host's speed: ~3,000 steps here give 1 -> ~0.6.)
    assert eps == sorted(eps, reverse=True) and eps[0] > 0.05 and eps[-1] < 1.0, eps
    train(tiny(**over, **{"stop.max_env_steps": first.env_steps + 12_000}), resume=run)
    after = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    resumed = [r["actor0_epsilon"] for r in after if r["env_steps"] > first.env_steps and "actor0_epsilon" in r]
    # From the checkpoint's count on, not from eps_start again: at most its epsilon at that count.
    assert resumed[0] <= 1.0 - 0.95 * first.env_steps / 8_000 + 1e-9
    assert resumed[-1] == pytest.approx(0.05)
