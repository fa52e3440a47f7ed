"""What a run returns and where it writes: ``train``'s summary and the run directory's name."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from apexrl.config import Config


@dataclass
class TrainResult:
    run_dir: Path
    env_steps: int
    learner_updates: int
    time_s: float
    eval_return_mean: float | None
    best_eval_return: float | None
    reached_target: bool
    stop_reason: str
    checkpoint: Path | None
    time_to_target_s: float | None = None
    env_steps_to_target: int | None = None
    best_checkpoint: Path | None = None  # weights of the best evaluation (what met the target, if one did)
    startup_s: float | None = None  # the command (process start) to the first env step; None: not this process's
    peak_memory_mb: float | None = None  # PSS of the run's processes on this machine (footprint.py)
    memory_by_role: dict[str, tuple[int, int]] = field(default_factory=dict)  # at the peak: role -> (processes, bytes)


def run_name(cfg: Config) -> str:
    env = cfg.env.id.rsplit(":", 1)[-1].rsplit(".", 1)[-1]  # my_pkg.envs:Grid-v0, my_pkg.envs.Grid -> Grid...
    env = re.sub(r"[^A-Za-z0-9_-]+", "-", env.replace("/", "-")).strip("-") or "env"
    return cfg.name or f"{env}__s{cfg.seed}__{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def default_run_dir(cfg: Config, runs_root: str | os.PathLike[str] = "runs") -> Path:
    return Path(runs_root) / run_name(cfg)
