"""Shared test helpers: tiny configs that keep a Ray run to seconds on 2 cores."""

from __future__ import annotations

from typing import Any

from apexrl.config import Config

TINY_NET = {"network.torso": [32], "network.head": 32}


def tiny_config(**over: Any) -> Config:
    """A small Ray run: 2 actors x 2 envs, small batches and replay, free-running learner (no rate limiter,
    so env-step budgets finish fast), no evaluation or checkpoints unless asked, silent console."""
    base = {"actors.num_actors": 2, "actors.envs_per_actor": 2, "actors.send_every": 32, **TINY_NET,
            "learner.batch_size": 32, "learner.publish_period": 10, "replay.capacity": 5_000,
            "replay.learning_starts": 200, "replay.samples_per_insert": None, "evaluation.interval_s": 0,
            "logging.report_interval_s": 0.5, "logging.console": "off", "checkpoint.every_reports": 0}
    base.update(over)
    return Config().replace(**base)
