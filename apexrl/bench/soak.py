"""Soak: `apexrl train` for a long time while a random actor, replay shard or the learner is SIGKILLed every
couple of minutes; then a resume from the final checkpoint and a greedy evaluation of the policy.

    apexrl bench soak --minutes 30 --kill-every 120

The run is a real ``apexrl train`` process (CartPole preset, 2 actors, 2 shards, replay snapshots in the
checkpoints); kills go to its Ray worker processes by name. Reported: each kill and how long until the
run's report counted the restart; restarts by role; learner updates lost (the update counter going back to
the last checkpoint's after a learner restart); replay transitions lost (replay size dropping after a shard
restart: a shard comes back from the last replay snapshot, estimated as the env steps since the last
checkpoint over the shards); RSS of every process over time, by role, and
whether the driver's and learner's stayed bounded (second half's peak < 1.5x first half's + 100 MiB);
whether every checkpoint on disk loads; the resume's first env-step count against the final checkpoint's;
the greedy evaluation's mean over 20 episodes. An actor's chunk in progress when it is killed is not
counted anywhere (its steps never reach replay), so env steps lost are bounded by one chunk per actor kill,
not measured. Writes bench-results/soak-<date>.json and the run dir next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from apexrl.bench._results import RESULTS, write_result

ROLES = {"actor": "ray::ActorWorker", "shard": "ray::ReplayShardWorker", "learner": "ray::LearnerWorker"}
NUM_SHARDS = 2
RSS_ROLES = {**ROLES, "raylet": "raylet", "gcs": "gcs_server"}


def _role(proc: Any) -> str:
    try:
        cmd = " ".join(proc.cmdline())
    except Exception:  # noqa: BLE001 - gone
        return "gone"
    for name, prefix in RSS_ROLES.items():
        if cmd.startswith(prefix) or f"/{prefix} " in cmd:
            return name
    return "other"


def rss_by_role(driver: Any) -> dict[str, float]:
    """MiB per role in the driver's process tree (the private Ray is its child)."""
    import psutil

    out: dict[str, float] = {"driver": driver.memory_info().rss / 2**20}
    for p in driver.children(recursive=True):
        try:
            mib = p.memory_info().rss / 2**20
        except psutil.Error:
            continue
        role = _role(p)
        out[role] = out.get(role, 0.0) + mib
        if role == "learner":
            out["learner_max"] = max(out.get("learner_max", 0.0), mib)
    return out


def kill_one(driver: Any, role: str, rng: random.Random) -> int | None:
    import psutil

    procs = [p for p in driver.children(recursive=True) if _role(p) == role]
    if not procs:
        return None
    victim = rng.choice(procs)
    try:
        os.kill(victim.pid, signal.SIGKILL)
    except (OSError, psutil.Error):
        return None
    return victim.pid


def _records(run: Path) -> list[dict[str, Any]]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # the line being written
            pass
    return out


def losses(records: list[dict[str, Any]]) -> dict[str, int]:
    """Learner updates lost: the update counter going back after a learner restart (the replacement takes
    the newest published weights and their version, the optimizer and target network of the last
    checkpoint), summed over the run."""
    lost = 0
    for a, b in zip(records, records[1:]):
        lost += max(0, a["learner_updates"] - b["learner_updates"])
    return {"learner_updates_lost": lost}


def replay_lost_estimate(kills: list[dict[str, Any]], checkpoint_steps: list[int], num_shards: int) -> int:
    """Transitions a shard kill loses: a replacement comes back from the last replay snapshot, so what
    that shard received since then is gone. Estimated as the env steps between the last checkpoint and
    the kill, split evenly over the shards."""
    lost = 0.0
    for k in kills:
        if k["role"] != "shard":
            continue
        before = [c for c in checkpoint_steps if c <= k["env_steps_before"]]
        lost += (k["env_steps_before"] - (max(before) if before else 0)) / num_shards
    return int(lost)


def _watch_recovery(kills: list[dict[str, Any]], records: list[dict[str, Any]], t: float) -> None:
    """Seconds from each kill until the run's report counted the restart, and until the learner's update
    count grew past the one it had at the kill (the learner's own restart, or any other kill, must not stop
    learning for long)."""
    if not records:
        return
    last = records[-1]
    for k in kills:
        if "restart_reported_after_s" not in k and last.get(f"{k['role']}_restarts", 0) > k["restarts_before"]:
            k["restart_reported_after_s"] = round(t - k["t"], 1)
            k["updates_at_restart"] = last.get("learner_updates", 0)
        elif "work_resumed_after_s" not in k and "updates_at_restart" in k \
                and last.get("learner_updates", 0) > k["updates_at_restart"]:
            k["work_resumed_after_s"] = round(t - k["t"], 1)


def bounded(series: list[tuple[float, float]], total_s: float) -> bool | None:
    first = [v for t, v in series if t <= total_s / 2]
    second = [v for t, v in series if t > total_s / 2]
    if not first or not second:
        return None
    return max(second) < 1.5 * max(first) + 100


def _train_cmd(run: Path, seconds: float, resume: bool, extra: list[str]) -> list[str]:
    base = [sys.executable, "-m", "apexrl", "train", "--set", f"stop.max_time_s={seconds:g}"]
    if resume:
        return [*base, "--resume", str(run)]
    return [*base, "--run-dir", str(run), "--set", "actors.num_actors=2", "--set", f"replay.num_shards={NUM_SHARDS}",
            "--set", "checkpoint.replay=true", "--set", "checkpoint.keep=1000", "--set", "logging.console=plain",
            *extra]


def main(argv: list[str] | None = None) -> int:
    import psutil

    p = argparse.ArgumentParser(prog="apexrl bench soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--kill-every", type=float, default=120.0, help="mean seconds between kills (±25%%)")
    p.add_argument("--roles", default="actor,shard,learner", help="what to kill, in turn at random")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], help="extra config overrides for the run")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    roles = [r for r in a.roles.split(",") if r]
    if not roles or any(r not in ROLES for r in roles):
        p.error(f"--roles {a.roles}: choose from {', '.join(ROLES)}")
    seconds = a.minutes * 60
    rng = random.Random(a.seed)
    run = RESULTS / f"soak-{datetime.now():%Y%m%d-%H%M%S}"
    RESULTS.mkdir(exist_ok=True)
    env = dict(os.environ)
    extra = [x for s in a.set for x in ("--set", s)]
    log = (run.parent / f"{run.name}.log").open("w")
    t0 = time.monotonic()
    proc = subprocess.Popen(_train_cmd(run, seconds, False, extra), env=env, stdout=log, stderr=subprocess.STDOUT)
    driver = psutil.Process(proc.pid)
    kills: list[dict[str, Any]] = []
    rss: list[dict[str, float]] = []
    next_kill = t0 + 60 + a.kill_every * rng.uniform(0.75, 1.25)  # let it learn first
    next_rss = t0
    while proc.poll() is None:
        now = time.monotonic()
        if now >= next_rss:
            try:
                rss.append({"t": round(now - t0, 1), **{k: round(v, 1) for k, v in rss_by_role(driver).items()}})
            except psutil.Error:
                pass
            next_rss = now + 10
        if now >= next_kill and now - t0 < seconds - 30:
            role = rng.choice(roles)
            records = _records(run)
            pid = kill_one(driver, role, rng)
            if pid is not None:
                last = records[-1] if records else {}
                kills.append({"t": round(now - t0, 1), "role": role, "pid": pid,
                              "restarts_before": last.get(f"{role}_restarts", 0),
                              "env_steps_before": last.get("env_steps", 0)})
                print(f"{now - t0:7.0f}s  killed {role} (pid {pid})", flush=True)
            next_kill = now + a.kill_every * rng.uniform(0.75, 1.25)
        _watch_recovery(kills, _records(run) if any("work_resumed_after_s" not in k for k in kills) else [], now - t0)
        time.sleep(1.0)
    wall = time.monotonic() - t0
    records = _records(run)
    text = (run.parent / f"{run.name}.log").read_text()
    last = records[-1] if records else {}

    from apexrl import checkpoint as ckpt

    ckpts = ckpt.list_checkpoints(run)
    bad = []
    for path in ckpts:
        try:
            ckpt.load_file(path)
        except Exception as e:  # noqa: BLE001 - reported, not raised
            bad.append(f"{path.name}: {e}")
    final_steps = ckpt.load_file(ckpts[-1])["counters"]["env_steps"] if ckpts else None

    resume_out = subprocess.run(_train_cmd(run, 45, True, []), env=env,
                                capture_output=True, text=True, timeout=900)
    both = resume_out.stdout + resume_out.stderr
    m = re.search(r"resumed from .* at ([\d,]+) env steps", both)
    resumed_at = int(m.group(1).replace(",", "")) if m else None
    done = re.search(r"done: .*?; ([\d,]+) env steps", both)
    eval_out = subprocess.run([sys.executable, "-m", "apexrl", "eval", str(run), "--episodes", "20"], env=env,
                              capture_output=True, text=True, timeout=600)
    em = re.search(r"return mean ([-\d.]+)", eval_out.stdout)

    series = {k: [(r["t"], r.get(k, 0.0)) for r in rss] for k in ("driver", "learner", "actor", "shard", "raylet", "gcs")}
    result = {
        "minutes": a.minutes, "kill_every_s": a.kill_every, "wall_s": round(wall, 1), "exit_code": proc.returncode,
        "traceback_in_output": "Traceback" in text, "kills": kills,
        "kills_by_role": {r: sum(k["role"] == r for k in kills) for r in ROLES},
        "restarts": {r: last.get(f"{r}_restarts") for r in ROLES},
        "env_steps": last.get("env_steps"), "updates": last.get("learner_updates"),
        "best_eval": max((r["eval_return_mean"] for r in records if "eval_return_mean" in r), default=None),
        "dropped_sends": last.get("dropped_sends"),
        **losses(records),
        "replay_transitions_lost_estimate": replay_lost_estimate(
            kills, [int(p.stem.split("-")[1]) for p in ckpts], NUM_SHARDS),
        "checkpoints": len(ckpts), "checkpoints_failing_to_load": bad,
        "final_checkpoint_env_steps": final_steps, "resume_exit_code": resume_out.returncode,
        "resumed_at_env_steps": resumed_at,
        "resume_end_env_steps": int(done.group(1).replace(",", "")) if done else None,
        "eval_20_episodes_mean": float(em.group(1)) if em else None,
        "rss_bounded": {k: bounded(v, wall) for k, v in series.items()},
        "rss_peak_mib": {k: max((v for _, v in s), default=None) for k, s in series.items()},
        "rss_mib": rss, "run_dir": str(run),
    }
    print(f"soak {a.minutes:g} min: exit {proc.returncode}, {len(kills)} kills {result['kills_by_role']}, restarts "
          f"{result['restarts']}, updates lost {result['learner_updates_lost']:,}, replay transitions lost (est.) "
          f"{result['replay_transitions_lost_estimate']:,}, checkpoints {len(ckpts)} ({len(bad)} failing), resumed at "
          f"{resumed_at} (final checkpoint {final_steps}), eval {result['eval_20_episodes_mean']}, "
          f"RSS bounded {result['rss_bounded']}, peaks MiB {result['rss_peak_mib']}")
    write_result("soak", result, a.out)
    return 0
