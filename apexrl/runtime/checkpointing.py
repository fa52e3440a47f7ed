"""Checkpoints of a Ray run: the learner's state, the counters, the config and (optionally) replay,
requested without blocking the driver; and a resume that loads them back into a new topology."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from apexrl import checkpoint as ckpt
from apexrl.config import Config, to_dict
from apexrl.runtime.cluster import cause
from apexrl.runtime.progress import Progress
from apexrl.runtime.topology import Topology

log = logging.getLogger(__name__)


def truncate_metrics(path: Path, counters: dict[str, Any]) -> None:
    """On resume, drop report lines written after the checkpoint so the curve has no repeats: a line stays
    only if none of its counters is past the checkpoint's (a report can count learner updates the
    checkpoint's learner state, asked for a chunk earlier, does not hold)."""
    if not path.exists():
        return
    limits = {k: counters[k] for k in ("env_steps", "learner_updates", "time_s") if counters.get(k) is not None}
    keep = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if all((rec.get(k) or 0) <= v for k, v in limits.items()):
            keep.append(line)
    path.write_text("".join(x + "\n" for x in keep))


class Checkpointer:
    """The driver's side of checkpoints. The driver has no torch: the learner composes each file
    (``LearnerWorker.checkpoint``) and the driver writes the bytes it gets. A checkpoint with replay
    (``checkpoint.replay``, gigabytes on Atari) is the exception: the driver adds the shards' states and
    streams the file itself, loading torch for it."""

    def __init__(self, cfg: Config, topology: Topology, run_dir: Path, progress: Progress) -> None:
        self.cfg, self.topology, self.run_dir, self.progress = cfg, topology, run_dir, progress
        self.replay_snapshot: list[dict[str, Any]] | None = None  # the last complete one (shard restarts use it)
        self.last: Path | None = None
        # The last saved learner state (or its checkpoint's bytes): a restarted learner's start.
        self.learner_state: dict[str, Any] | bytes | None = None

    def resume(self, state: dict[str, Any], path: Path) -> None:
        self.progress.restore(state["counters"])
        try:
            ray.get(self.topology.learner.load_state_dict.remote(state["learner"]))
        except RayTaskError as e:
            raise ckpt.CheckpointError(
                f"checkpoint '{path}' does not fit this config's network ({cause(e)}); resume with "
                "the run's own network settings, or start a new run") from None
        if state.get("replay") and len(state["replay"]) == len(self.topology.shards):
            ray.get([s.load_state_dict.remote(st) for s, st in zip(self.topology.shards, state["replay"])])
            self.replay_snapshot = state["replay"]
        self.learner_state = state["learner"]
        truncate_metrics(self.run_dir / "metrics.jsonl", state["counters"])
        self.last = path

    def request(self, elapsed: float) -> dict[str, Any]:
        """Ask the learner (and the shards) for a checkpoint of now. The caller holds the system still
        (``Fleet.hold``), so counters, learner and replay are all of one moment."""
        header = {"counters": self.progress.counters(elapsed), "config": to_dict(self.cfg),
                  "num_actors": self.topology.num_actors}
        refs: dict[str, Any] = {"learner": self.topology.learner.checkpoint.remote(header),
                                "step": self.progress.env_steps}
        if self.cfg.checkpoint.replay:
            refs["replay"] = [s.state_dict.remote() for s in self.topology.shards]
        return refs

    def periodic(self, elapsed: float) -> Path | None:
        """A checkpoint during the run (the caller holds the system); a learner that died meanwhile skips it."""
        if self.progress.updates == 0:
            return None
        try:
            return self.save(self.request(elapsed))
        except (RayActorError, RayTaskError) as e:
            log.warning("periodic checkpoint skipped: %s", cause(e))
            return None

    def best_state(self, res: dict[str, Any], elapsed: float) -> dict[str, Any]:
        """``best.pt``'s contents: the weights an evaluation played with, and that evaluation."""
        returns = [float(r) for r in res["eval_returns"]]
        evaluation = {"mean": float(sum(returns) / len(returns)), "returns": returns, "episodes": len(returns),
                      "seed": int(res["seed"]),  # of the first part: (seed, episodes) each in "parts"
                      "parts": [[int(seed), int(n)] for seed, n in res.get("parts", [(res["seed"], len(returns))])],
                      "weights_version": int(res["weights_version"]), "env_steps": self.progress.env_steps,
                      "time_s": self.progress.time_offset + elapsed}
        return {"learner": {"net": res["weights"]}, "config": to_dict(self.cfg), "evaluation": evaluation,
                "counters": self.progress.counters(elapsed)}

    def best(self, res: dict[str, Any], elapsed: float) -> Path:
        """Keep the weights an evaluation played with, and that evaluation, as ``best.pt`` (the learner's
        process turns them into the file's bytes)."""
        data = ray.get(self.topology.learner.serialize.remote(self.best_state(res, elapsed)), timeout=120)
        return ckpt.save_best(self.run_dir, data)

    def final(self, elapsed: float) -> Path:
        return self.save(self.request(elapsed))

    def save(self, refs: dict[str, Any], run_dir: Path | None = None) -> Path:
        """Write the checkpoint ``refs`` (from ``request``) asked for, under ``run_dir`` (default: the run's own)."""
        file = ray.get(refs["learner"])
        self.learner_state = file  # without replay, which the driver adds below: small
        state: dict[str, Any] | bytes = self._with_replay(file, refs) if "replay" in refs else file
        self.last = ckpt.save(run_dir or self.run_dir, state, step=refs["step"], keep=self.cfg.checkpoint.keep)
        return self.last

    def _with_replay(self, file: bytes, refs: dict[str, Any]) -> dict[str, Any]:
        import io

        state = ckpt.safe_load(io.BytesIO(file))
        try:
            state["replay"] = ray.get(refs["replay"], timeout=300)
            self.replay_snapshot = state["replay"]
        except (RayActorError, RayTaskError, GetTimeoutError) as e:
            # A shard died (or went unreachable) as it was asked: keep the learner's state, and the last
            # complete replay snapshot if there is one, rather than lose the checkpoint.
            if self.replay_snapshot is not None and len(self.replay_snapshot) == len(refs["replay"]):
                state["replay"] = self.replay_snapshot
            log.warning("checkpoint at %d env steps: a replay shard did not answer (%s); saved %s",
                        refs["step"], cause(e),
                        "the previous replay snapshot" if "replay" in state else "without replay contents")
        return state
