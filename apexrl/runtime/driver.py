"""The driver: assembles the system on Ray and runs the loop that composes scheduling, supervision,
evaluations, checkpoints, stop conditions and reports.

The driver never touches experience and is in no actor's loop: actors run from start to stop and push
their counters to the board (``runtime/board.py``), which the driver reads once per report.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray

from apexrl import checkpoint as ckpt
from apexrl.agents.base import ModelFactory
from apexrl.config import Config, dump_yaml, flatten, to_dict
from apexrl.config.agent_defaults import agent_defaults_in_effect
from apexrl.envs.spaces import codec_of
from apexrl.metrics import Console
from apexrl.runtime.assembly import assemble, auto_num_actors, fit_to_cluster, logical_cpus
from apexrl.runtime.checkpointing import Checkpointer
from apexrl.runtime.cluster import (
    ClusterError,
    init_ray,
    ship_by_value,
    shutdown_ray,
    sigterm_as_interrupt,
)
from apexrl.runtime.evaluations import Evaluations
from apexrl.runtime.fleet import LEARNER_CHUNK_S, Fleet
from apexrl.runtime.footprint import PeakMemory, Startup, by_role
from apexrl.runtime.progress import Progress
from apexrl.runtime.reporting import Reporter, Window
from apexrl.runtime.results import TrainResult, default_run_dir, run_name
from apexrl.runtime.scheduling import StartWatch
from apexrl.runtime.stopping import StopConditions
from apexrl.runtime.supervisor import Supervisor, TrainingError
from apexrl.runtime.topology import Topology

log = logging.getLogger(__name__)

def train(cfg: Config, model_factory: ModelFactory | None = None, run_dir: str | os.PathLike[str] | None = None,
          address: str | None = None, resume: str | os.PathLike[str] | None = None, dashboard: bool = False,
          console: Console | None = None, runs_root: str | os.PathLike[str] = "runs",
          startup: Startup | None = None) -> TrainResult:
    """Train with ``cfg``; a custom ``model_factory(obs_space, action_space) -> nn.Module`` replaces the
    agent's built-in network. Blocks until a stop condition; returns a summary. ``startup``: the marks of
    this process's start so far (the CLI's); the first env step closes them."""
    startup = startup or Startup()
    startup.mark("Python and imports")
    assemble(cfg, num_actors=1)  # env and agent checked before any run dir or Ray exists
    resume_state: dict[str, Any] | None = None
    resume_path: Path | None = None
    if resume is not None:
        resume_path, resume_state = ckpt.load_latest(Path(resume))
        rdir = Path(resume)
    else:
        rdir = Path(run_dir) if run_dir is not None else default_run_dir(cfg, runs_root)
    console = console or Console(cfg.logging.console)

    host_cpus = max(os.cpu_count() or 1, 1)
    # A private Ray gets as many logical CPUs as the run asks for, decided before ray.init: a restart to
    # fix it afterwards cost ~4 s of start-up.
    startup.mark("env check")
    started_ray = init_ray(address, num_cpus=logical_cpus(cfg, host_cpus), dashboard=dashboard)
    startup.mark("Ray")  # no time when the CLI started it ahead
    previous_sigterm = sigterm_as_interrupt()  # after ray.init, which installs its own (aborting) handler
    topology: Topology | None = None
    # A private Ray's processes are this one's children; on a cluster, most of the run is elsewhere.
    memory = PeakMemory().start() if started_ray and address is None else None
    try:
        cfg, topology = build_topology(cfg, rdir, model_factory, private=started_ray and address is None)
        startup.mark("roles requested")
        return Loop(cfg, topology, rdir, console, resume_state, resume_path, startup, memory).run()
    finally:
        if memory is not None:
            memory.stop()
        if topology is not None:
            topology.kill()
        if started_ray:
            shutdown_ray()
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)


def build_topology(cfg: Config, rdir: Path, model_factory: ModelFactory | None,
                   private: bool, group: Any = None) -> tuple[Config, Topology]:
    """On a running Ray (``private``: one this process started on loopback): the config fitted to the
    cluster, the run dir and its config.yaml written, the model factory shipped, the Ray actors built.
    ``apexrl train`` and ``ApexTrainer`` both start a run here; ``group``: a placement group reserved for
    the learner and one bundle per actor (a Tune trial's), which then sets the number of actors."""
    host_cpus = max(os.cpu_count() or 1, 1)
    resources = ray.cluster_resources()
    cluster_cpus = float(resources.get("CPU", host_cpus))
    if group is not None:
        num_actors = len(group.bundle_specs) - 1  # the group holds what they need: nothing to fit
    else:
        num_actors = auto_num_actors(cfg, host_cpus if private else cluster_cpus)
        cfg = fit_to_cluster(cfg, cluster_cpus, float(resources.get("GPU", 0)), num_actors)  # nothing waits
    if model_factory is not None:
        ship_by_value(model_factory)
    system = assemble(cfg, num_actors=num_actors, model_factory=model_factory)
    rdir.mkdir(parents=True, exist_ok=True)
    (rdir / "config.yaml").write_text(dump_yaml(system.cfg))  # as found: env.api, a mapping function's table
    return system.cfg, Topology(system, group, on_cluster=not private)


class Loop:
    """When each part of the driver acts: scheduling (``fleet``), supervision (``supervisor``), evaluations,
    checkpoints (``checkpointer``), stop conditions and reports. The driver's work per second is the
    learner's four calls, one board summary per report and a look at the actors' loops every
    ``fleet.LIVENESS_S``, whatever the number of actors."""

    def __init__(self, cfg: Config, topology: Topology, run_dir: Path, console: Console,
                 resume_state: dict[str, Any] | None, resume_path: Path | None, startup: Startup | None = None,
                 memory: PeakMemory | None = None) -> None:
        """``startup``: the marks of this process's start (None: start-up is not this run's, e.g. a trainer's
        later calls); ``memory``: a sampler of the run's processes."""
        self.cfg, self.topology, self.console = cfg, topology, console
        self.startup, self.memory = startup, memory
        brought = agent_defaults_in_effect(cfg.agent, flatten(to_dict(cfg))) if startup is not None else {}
        if brought:
            console.message(f"agent {cfg.agent}: " + ", ".join(f"{k}={v}" for k, v in brought.items())
                            + " (the agent's defaults; --set any of them to change it)")
        self.progress = Progress(topology.num_actors)
        self.supervisor = Supervisor(topology, self.progress, console)
        self.start_watch = StartWatch(topology, console.message)
        self.checkpointer = Checkpointer(cfg, topology, run_dir, self.progress)
        self.stop = StopConditions(cfg.stop)
        if resume_state is not None and resume_path is not None:
            self.checkpointer.resume(resume_state, resume_path)
            ray.get(topology.board.restore.remote(self.progress.env_steps, self.progress.episodes,
                                                 self.progress.transitions_sent))
            console.message(f"resumed from {resume_path} at {self.progress.env_steps:,} env steps, "
                            f"{self.progress.updates:,} updates")
        self.reporter = Reporter(cfg, run_dir, console, self.progress, resumed=resume_state is not None)
        codec = codec_of(topology.system.observation_space)
        if codec is not None and resume_state is None:
            mask = f"; legal actions from the {codec.mask_source}" if codec.mask_source else ""
            console.message(f"observations: {codec.describe()}; {codec.row_bytes} bytes each in replay{mask}")
        self.run_dir = run_dir
        # Short: a stop or a hold waits for the learner's call in flight (1 s calls made a stop ~0.8 s longer).
        self.fleet = Fleet(topology, self.supervisor, min(LEARNER_CHUNK_S, cfg.logging.report_interval_s / 2),
                           self._on_learner, lambda: self.checkpointer.learner_state)

    def _on_learner(self, res: dict[str, Any]) -> None:
        self.progress.updates = res["total_updates"]
        self.window.add_learner(res)
        self.last_learner = res
        if res["consecutive_skips"] >= self.cfg.learner.max_consecutive_skips:
            raise TrainingError(f"{res['consecutive_skips']} learner updates in a row had a "
                                "non-finite loss or gradient; lower learner.lr or check rewards")

    def sync(self) -> None:
        """The board's summary into the run's counters (one call, whatever the number of actors)."""
        summary = ray.get(self.topology.board.take.remote(), timeout=60)
        self.window.steps += self.progress.on_summary(summary)
        if summary["spent"]:
            self.next_report = time.monotonic()  # report and stop now, not a report interval later
        started = self.progress.first_step_at
        if self.startup is not None and started is not None and "first env step" not in self.startup.marks:
            self.startup.mark("workers", started)
            self.startup.mark("first env step", started)
            self.console.message(f"start-up: first env step {self.startup.since_start('first env step'):.1f} s "
                                 "after the command (" + ", ".join(f"{k} {v:.1f} s" for k, v in
                                                                   self.startup.parts() if v >= 0.05) + ")")

    def hold(self) -> None:
        """Stand the system still (actors paused, learner idle) with the learner's weights published and the
        counters exact: ApexTrainer between calls."""
        self.fleet.hold()
        ray.get(self.topology.learner.publish.remote(), timeout=120)
        self.sync()

    def release(self) -> None:
        """Let the system run again after :meth:`hold`."""
        self.fleet.release()

    def run(self) -> TrainResult:
        """Train until a stop condition (or Ctrl-C / SIGTERM), then stop, evaluate and checkpoint."""
        self.start()
        try:
            self.advance()
        except KeyboardInterrupt:
            self.stop_reason = "interrupted"
            self.console.message("interrupted: writing a final checkpoint (Ctrl-C again to stop at once)")
        result = self.finish()
        if self.fleet.env_failure:
            raise TrainingError(f"{self.fleet.env_failure}; final checkpoint: {result.checkpoint}")
        return result

    def start(self, held: bool = False) -> None:
        """Start every actor's loop and the learner (``held``: standing still until :meth:`release`); the
        clock starts here."""
        cfg = self.cfg
        self.t_start = time.monotonic()
        self.next_report = self.t_start + cfg.logging.report_interval_s
        self.window = Window(self.t_start)
        self.last_learner: dict[str, Any] = {}
        self.last_record: dict[str, Any] = {}
        self.eval_returns: list[float] | None = None
        self.stop_reason = ""
        confirm = cfg.stop.confirm_episodes
        self.evaluations = Evaluations(self.topology.evaluator, cfg.evaluation.interval_s, self.progress,
                                       self.checkpointer, self.elapsed, self.stop.target_reached,
                                       2 * cfg.evaluation.episodes if confirm is None else confirm,
                                       self.console.message)
        self.fleet.start(held)

    def elapsed(self) -> float:
        return time.monotonic() - self.t_start

    def advance(self, duration_s: float = float("inf")) -> None:
        """Run the loop for ``duration_s`` seconds or until a stop condition holds (``stop_reason``)."""
        until = time.monotonic() + duration_s
        while not self.stop_reason and time.monotonic() < until:
            timeout = max(0.0, min(self.next_report, until) - time.monotonic())
            if self.evaluations.running:
                timeout = min(timeout, 0.02)  # look at the evaluation often
            self.fleet.wait(timeout)
            if self.fleet.env_failure:
                self.stop_reason = self.fleet.env_failure
                break
            if self.startup is not None and self.progress.first_step_at is None:
                self.sync()  # until the first env step: its start-up line comes as it happens
            returns = self.evaluations.poll()
            if returns:
                self.eval_returns = returns
                if self.stop.target_reached(returns, self.progress.eval_seats):
                    self.next_report = time.monotonic()  # report and stop now, not at the next tick
            if self.fleet.all_ended():
                self.next_report = time.monotonic()
            now = time.monotonic()
            if now >= self.next_report:
                self._report(now)

    def _report(self, now: float) -> None:
        self.next_report = now + self.cfg.logging.report_interval_s
        self.start_watch.poll()
        self.supervisor.check_shards(self.checkpointer.replay_snapshot)
        self.sync()
        record = self.reporter.report(now - self.t_start, self.window, self.last_learner, self.eval_returns,
                                      self.memory.last_mb if self.memory and self.memory.last else None)
        self.last_record = record
        self.stop_reason = self.stop.check(self.eval_returns, record["time_s"], self.progress.env_steps,
                                           now - self.t_start, self.progress.low_exploration_returns(),
                                           self.progress.eval_seats)
        if not self.stop_reason and self.fleet.all_ended():
            self.stop_reason = "every actor has ended"  # budget spent: the check above says so when it counts
        self.eval_returns = None
        self.window = Window(now)
        every = self.cfg.checkpoint.every_reports
        if every and self.progress.reports % every == 0 and not self.stop_reason:
            self.fleet.hold()  # counters, learner and replay of one moment
            try:
                self.sync()
                self.checkpointer.periodic(now - self.t_start)
            finally:
                self.fleet.release()

    def finish(self) -> TrainResult:
        """Stop actors and learner, evaluate if the run has no evaluation yet, report, checkpoint."""
        progress, stop_reason = self.progress, self.stop_reason or "stopped"
        if not self.fleet.env_failure:  # that one is said once, with the final checkpoint, by the caller
            self.console.message(f"stopping: {stop_reason}")
        self.fleet.stop()
        self.sync()
        final_eval = self.evaluations.final(interrupted=stop_reason == "interrupted")
        elapsed = self.elapsed()
        mem = self.memory
        if mem is not None:
            mem.sample()
        footprint = {"startup_s": self.startup.since_start("first env step") if self.startup else None,
                     "peak_memory_mb": round(mem.peak_mb, 1) if mem and mem.peak else None}
        self.reporter.report(elapsed, self.window, self.last_learner, final_eval, mem.last_mb if mem else None,
                             footprint)
        path = self.checkpointer.final(elapsed)
        self.reporter.close()
        self.console.message(f"checkpoint: {path}")
        return TrainResult(**footprint, memory_by_role=by_role(mem.at_peak) if mem else {},
            run_dir=self.run_dir, env_steps=progress.env_steps, learner_updates=progress.updates,
            time_s=progress.time_offset + elapsed, eval_return_mean=progress.last_eval,
            best_eval_return=progress.best_eval, reached_target=self.stop.time_to_target is not None,
            stop_reason=stop_reason, checkpoint=path, time_to_target_s=self.stop.time_to_target,
            env_steps_to_target=self.stop.steps_to_target, best_checkpoint=ckpt.best_path(self.run_dir),
        )

    def take_evaluation(self, result: Callable[[], dict[str, Any]]) -> list[float]:
        """An evaluation's returns recorded as the run's (ApexTrainer.evaluate's)."""
        return self.evaluations.take(result)


__all__ = ["ClusterError", "Loop", "TrainResult", "TrainingError", "auto_num_actors", "default_run_dir", "init_ray",
           "run_name", "train"]
