"""Soak: a long run with actors and shards SIGKILLed at random intervals (slow; run explicitly).

    APEXRL_SOAK_S=1800 python -m pytest -m slow tests/test_soak.py -s

Checks at the end: the run is still learning, replay size is consistent with inserts minus evictions,
the driver's memory did not grow without bound, and every checkpoint on disk loads. Prints the figures.
"""

import json
import os
import random
import signal
import threading
import time

import psutil
import pytest

from apexrl import checkpoint as ckpt
from apexrl.config import Config
from apexrl.runtime.driver import train

SOAK_S = float(os.environ.get("APEXRL_SOAK_S", "1800"))
pytestmark = [pytest.mark.slow, pytest.mark.timeout(int(SOAK_S) + 600)]


def _killer(stop: threading.Event, log: list[tuple[float, str, int]], rss: list[tuple[float, float]]):
    rng = random.Random(0)
    me = psutil.Process()
    t0 = time.time()
    while not stop.wait(rng.uniform(20, 60)):
        rss.append((time.time() - t0, sum(p.memory_info().rss for p in [me, *me.children(recursive=True)]
                                          if p.is_running()) / 2**20))
        target = rng.choice(["ActorWorker", "ActorWorker", "ReplayShardWorker"])
        for p in me.children(recursive=True):
            try:
                if " ".join(p.cmdline()).startswith(f"ray::{target}"):
                    os.kill(p.pid, signal.SIGKILL)
                    log.append((time.time() - t0, target, p.pid))
                    break
            except (psutil.Error, OSError):
                continue


def test_soak_with_random_kills(tmp_path):
    cfg = Config().replace(**{
        "actors.num_actors": 2, "replay.num_shards": 2, "replay.capacity": 50_000,
        "checkpoint.every_reports": 30, "checkpoint.replay": True, "checkpoint.keep": 100,
        "logging.console": "plain", "stop.max_time_s": SOAK_S, "network.torso": [64], "network.head": 64})
    stop, kills, rss = threading.Event(), [], []
    t = threading.Thread(target=_killer, args=(stop, kills, rss), daemon=True)
    t.start()
    try:
        res = train(cfg, run_dir=tmp_path / "soak")
    finally:
        stop.set()
    records = [json.loads(x) for x in (tmp_path / "soak" / "metrics.jsonl").read_text().splitlines()]
    last = records[-1]
    print(f"\nsoak {SOAK_S:.0f}s: kills {len(kills)} ({', '.join(k[1] for k in kills)}), actor restarts "
          f"{last['actor_restarts']}, shard restarts {last['shard_restarts']}, env steps {res.env_steps:,}, "
          f"updates {res.learner_updates:,}, best eval {res.best_eval_return}")
    print("RSS MiB over time (process tree):", [(round(a), round(b)) for a, b in rss])
    assert kills, "faults were injected"
    assert last["actor_restarts"] + last["shard_restarts"] >= 1
    assert res.best_eval_return is not None and res.best_eval_return > 100, "still learning"
    assert last["replay_size"] is not None and last["replay_size"] <= cfg.replay.capacity
    half = [b for a, b in rss if a > SOAK_S / 2]
    first = [b for a, b in rss if a <= SOAK_S / 2]
    if half and first:
        assert max(half) < 1.5 * max(first) + 200, "memory grew without bound"
    for path in ckpt.list_checkpoints(tmp_path / "soak"):
        ckpt.load_file(path)
