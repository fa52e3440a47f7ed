"""One report every ``logging.report_interval_s``: rates over the window since the last report, the
learner's metrics averaged over its updates, evaluation results; to metrics.jsonl, TensorBoard and the
console."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from apexrl.config import Config, flatten, to_dict
from apexrl.envs import is_atari
from apexrl.envs.scores import human_normalized_score
from apexrl.metrics import Console, MetricsWriter
from apexrl.runtime.progress import Progress


@dataclass
class Window:
    """What happened since the last report."""

    t: float = field(default_factory=time.monotonic)
    steps: int = 0
    updates: int = 0
    learn_time: float = 0.0
    idle: float = 0.0
    sums: dict[str, float] = field(default_factory=dict)
    n: int = 0

    def add_learner(self, res: dict[str, Any]) -> None:
        self.updates += res["updates"]
        self.learn_time += res["time_s"] + res["gap_s"]
        self.idle += res["idle_s"] + res["gap_s"]
        if res["updates"]:
            for k, v in res["metrics"].items():
                self.sums[k] = self.sums.get(k, 0.0) + v * res["updates"]
            self.n += res["updates"]


class Reporter:
    def __init__(self, cfg: Config, run_dir: Path, console: Console, progress: Progress, resumed: bool) -> None:
        self.cfg, self.console, self.progress = cfg, console, progress
        self._nonfinite_said = 0
        self.metrics = MetricsWriter(run_dir, cfg.logging.tensorboard,
                                     purge_step=progress.env_steps if resumed else None)
        if not resumed:
            self.metrics.hparams(flatten(to_dict(cfg)))

    def report(self, elapsed: float, w: Window, learner: dict[str, Any], eval_returns: list[float] | None,
               memory_mb: float | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """``memory_mb``: the run's processes now (PSS); ``extra``: keys of the final record (start-up, peak memory)."""
        p = self.progress
        p.reports += 1
        dt = max(1e-9, time.monotonic() - w.t)
        rec: dict[str, Any] = {
            "time_s": round(p.time_offset + elapsed, 3),
            "env_steps": p.env_steps,
            "learner_updates": p.updates,
            "episodes": p.episodes,
            "train_return_mean": float(np.mean(p.recent_returns)) if p.recent_returns else None,
            "train_return_low_explore_mean": float(np.mean(low)) if (low := p.low_exploration_returns()) else None,
            # The actors' own speed over their last pushes: a push period can be as long as a report
            # window, and the window's count would then alternate between 0 and double.
            "env_steps_per_s": p.env_steps_per_s or w.steps / dt,
            "updates_per_s": w.updates / dt,
            "learner_idle_fraction": (w.idle / w.learn_time) if w.learn_time > 0 else None,
            "replay_size": learner.get("replay_size"),
            "replay_inserted": learner.get("replay_inserted"),
            "beta": learner.get("beta"),
            "skipped_updates": learner.get("skipped_updates", 0),
            "actor_restarts": p.actor_restarts,
            "shard_restarts": p.shard_restarts,
            "learner_restarts": p.learner_restarts,
            "dropped_sends": p.dropped_sends,
            "nonfinite_env_steps": p.nonfinite[0],
            "nonfinite_dropped": p.nonfinite[1],
        }
        if rec["nonfinite_env_steps"] > self._nonfinite_said:  # one line per report at most
            self.console.message(f"env '{self.cfg.env.id}' returned a non-finite reward or observation in "
                                 f"{rec['nonfinite_env_steps'] - self._nonfinite_said:,} env steps since the last "
                                 f"report; {rec['nonfinite_dropped']:,} transitions dropped so far (env.non_finite: "
                                 "drop)")
        self._nonfinite_said = max(self._nonfinite_said, rec["nonfinite_env_steps"])
        if memory_mb is not None:
            rec["memory_mb"] = round(memory_mb, 1)
        rec.update({k: v for k, v in (extra or {}).items() if v is not None})
        if w.n:
            rec.update({k: v / w.n for k, v in w.sums.items()})
        if eval_returns is not None:
            rec["eval_return_mean"] = float(np.mean(eval_returns))
            rec["eval_return_std"] = float(np.std(eval_returns))
            hns = human_normalized_score(self.cfg.env.id, rec["eval_return_mean"])
            if hns is not None and is_atari(self.cfg.env):
                rec["eval_hns"] = hns
            rec.update(p.eval_seats)
        for i in sorted(p.actor_exploration.keys() | p.actor_returns.keys()):  # small runs only (the board's)
            if i in p.actor_exploration:
                name, value = p.actor_exploration[i]
                rec[f"actor{i}_{name}"] = value
            if p.actor_returns.get(i):
                rec[f"actor{i}_return_mean"] = float(np.mean(p.actor_returns[i]))
        self.metrics.write(rec, step=p.env_steps)
        self.console.update({**p.eval_seats, **rec, "eval_return_mean_last": p.last_eval})
        return rec

    def close(self) -> None:
        self.metrics.close()
