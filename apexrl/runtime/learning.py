"""The learner's loop, Ray-free: batches from the replay client, the agent's update, priorities back,
weights published every ``learner.publish_period`` updates. The Ray learner worker and the in-process
runner both run this loop; only the transport under the replay client and ``publish`` differ."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from apexrl.agents.base import Learner
from apexrl.config import Config
from apexrl.core import Weights
from apexrl.replay.client import ReplayClient, beta_at

Publish = Callable[[int, Weights], None]


class LearnerLoop:
    def __init__(self, cfg: Config, learner: Learner, client: ReplayClient, publish: Publish,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.cfg, self.learner, self.client, self._publish, self._sleep = cfg, learner, client, publish, sleep
        self.version = 0
        self._last_end: float | None = None
        self.publish()

    def publish(self) -> None:
        self.version = self.learner.updates
        self._publish(self.version, self.learner.weights())

    def beta(self) -> float:
        return beta_at(self.cfg, self.learner.updates)

    def train(self, duration_s: float, max_updates: int | None = None,
              stop_when_refused: bool = False) -> dict[str, Any]:
        """Update for about ``duration_s`` seconds (or ``max_updates``); return aggregated metrics.
        ``stop_when_refused``: return at the first refused sample instead of waiting (in-process runs,
        where nobody else can fill replay while this loop waits)."""
        lc = self.cfg.learner
        t0 = time.perf_counter()
        # Time since the last call ended: the learner sat waiting for the caller's next call.
        gap = 0.0 if self._last_end is None else t0 - self._last_end
        c0 = time.process_time()
        waited = 0.0
        sums: dict[str, float] = {}
        n = skipped = 0
        B = lc.batch_size
        while time.perf_counter() - t0 < duration_s and (max_updates is None or n < max_updates):
            tw = time.perf_counter()
            s, res = self.client.next(self.beta())
            waited += time.perf_counter() - tw
            if res is None or "batch" not in res:  # a failed shard; or warming up, or ahead of the ratio
                if stop_when_refused:
                    break
                tw = time.perf_counter()
                self._sleep(0.01 if res is None else 0.002)
                waited += time.perf_counter() - tw
                continue
            for j in range(int(res.get("num_batches", 1))):
                rows = slice(j * B, (j + 1) * B)
                prios, m = self.learner.update({k: v[rows] for k, v in res["batch"].items()}, res["weights"][rows])
                if prios is None:
                    skipped += 1
                    continue
                self.client.write_back(s, res["indices"][rows], prios)
                n += 1
                for k, v in m.items():
                    sums[k] = sums.get(k, 0.0) + v
                if self.learner.updates % lc.publish_period == 0:
                    self.publish()
        out: dict[str, Any] = {"metrics": {k: v / n for k, v in sums.items()} if n else {}}
        out.update({
            "cpu_s": time.process_time() - c0,  # this process's CPU: updates per CPU second survive a busy host
            "updates": n,
            "total_updates": self.learner.updates,
            "skipped_updates": self.learner.skipped_updates,
            "consecutive_skips": self.learner.consecutive_skips,
            "time_s": time.perf_counter() - t0,
            "idle_s": waited,
            "gap_s": gap,
            "replay_size": int(self.client.sizes.sum()),
            "replay_inserted": int(self.client.inserted.sum()),
            "beta": self.beta(),
            "weights_version": self.version,
        })
        self._last_end = time.perf_counter()
        return out
