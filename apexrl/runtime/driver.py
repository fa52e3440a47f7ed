"""The driver: assembles the system on Ray and runs the loop that hands out work and composes the
supervisor, the reporter, the stop conditions and the checkpointer.

The driver never touches experience: it reissues work in chunks (``actor.run``, ``learner.train``),
collects their statistics, and reports every ``logging.report_interval_s`` seconds.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from apexrl import checkpoint as ckpt
from apexrl.agents.base import ModelFactory
from apexrl.config import Config, dump_yaml
from apexrl.envs.contract import EnvContractError
from apexrl.envs.spaces import codec_of
from apexrl.metrics import Console
from apexrl.runtime.assembly import assemble, auto_num_actors, fit_to_cluster, logical_cpus
from apexrl.runtime.checkpointing import Checkpointer
from apexrl.runtime.cluster import (
    ClusterError,
    cause,
    init_ray,
    ship_by_value,
    shutdown_ray,
    sigterm_as_interrupt,
)
from apexrl.runtime.footprint import PeakMemory, Startup, by_role
from apexrl.runtime.progress import Progress
from apexrl.runtime.reporting import Reporter, Window
from apexrl.runtime.results import TrainResult, default_run_dir, run_name
from apexrl.runtime.scheduling import StartWatch
from apexrl.runtime.stopping import StopConditions
from apexrl.runtime.supervisor import Supervisor, TrainingError
from apexrl.runtime.topology import Topology

log = logging.getLogger(__name__)

ACTOR_CHUNK_S = 0.25
LEARNER_CHUNK_S = 0.25


def first_actor_chunk(envs_per_actor: int) -> int:
    """Vector steps of an actor's first ``run`` call, before its speed is known (~256 env steps)."""
    return max(1, 256 // envs_per_actor)


def next_actor_chunk(res: dict[str, Any], envs_per_actor: int) -> int:
    """Vector steps for ~ACTOR_CHUNK_S of acting at the speed the last chunk ran: long enough that a Ray
    call per chunk costs the actor (and the driver) little, short enough that a dead actor is noticed and
    the report stays current."""
    per_step = res["time_s"] / max(1, res["env_steps"] // envs_per_actor)
    return int(np.clip(ACTOR_CHUNK_S / max(per_step, 1e-6), 1, 10_000))


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
    rdir.mkdir(parents=True, exist_ok=True)
    (rdir / "config.yaml").write_text(dump_yaml(cfg))
    if model_factory is not None:
        ship_by_value(model_factory)
    system = assemble(cfg, num_actors=num_actors, model_factory=model_factory)
    return system.cfg, Topology(system, group)


class Loop:
    """Hands out actor and learner chunks as they finish; between them, evaluations, reports, stop
    checks and checkpoints."""

    def __init__(self, cfg: Config, topology: Topology, run_dir: Path, console: Console,
                 resume_state: dict[str, Any] | None, resume_path: Path | None, startup: Startup | None = None,
                 memory: PeakMemory | None = None) -> None:
        """``startup``: the marks of this process's start (None: start-up is not this run's, e.g. a trainer's
        later calls); ``memory``: a sampler of the run's processes."""
        self.cfg, self.topology, self.console = cfg, topology, console
        self.startup, self.memory = startup, memory
        self.progress = Progress(topology.num_actors)
        self.supervisor = Supervisor(topology, self.progress, console)
        self.start_watch = StartWatch(topology, console.message)
        self.checkpointer = Checkpointer(cfg, topology, run_dir, self.progress)
        self.stop = StopConditions(cfg.stop)
        if resume_state is not None and resume_path is not None:
            self.checkpointer.resume(resume_state, resume_path)
            console.message(f"resumed from {resume_path} at {self.progress.env_steps:,} env steps, "
                            f"{self.progress.updates:,} updates")
        self.reporter = Reporter(cfg, run_dir, console, self.progress, resumed=resume_state is not None)
        codec = codec_of(topology.system.observation_space)
        if codec is not None and resume_state is None:
            mask = f"; legal actions from the {codec.mask_source}" if codec.mask_source else ""
            console.message(f"observations: {codec.describe()}; {codec.row_bytes} bytes each in replay{mask}")
        self.run_dir = run_dir
        self.pending: dict[Any, tuple[str, int]] = {}
        self.chunk = {i: first_actor_chunk(cfg.actors.envs_per_actor) for i in range(topology.num_actors)}
        # Short: a stop waits for the chunk in flight before the final checkpoint (1 s chunks made it ~0.8 s).
        self.learner_chunk = min(LEARNER_CHUNK_S, cfg.logging.report_interval_s / 2)
        self.holding = False  # no new chunks: actors and learner stand still once theirs finish
        self._actors_held = False

    def _start_actor(self, i: int) -> None:
        if not (self.holding or self._actors_held):
            self.pending[self.topology.actors[i].run.remote(self.chunk[i], self.progress.env_steps)] = ("actor", i)

    def _start_learner(self) -> None:
        if not self.holding:
            self.pending[self.topology.learner.train.remote(self.learner_chunk)] = ("learner", 0)

    def hold(self) -> None:
        """Let the chunks in flight finish and hand out no more, then publish the learner's weights: the
        system stands still, and its published weights are the learner's (ApexTrainer between calls).
        Actors first, while the learner still samples: a rate-limited actor waits for it to finish a send."""
        self._actors_held = True
        for role in ("actor", "learner"):
            self.holding = role == "learner"
            while any(kind == role for kind, _ in self.pending.values()):
                ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    self.last_learner = self._collect(ref, self.window) or self.last_learner
                self.start_watch.poll()  # a role Ray never starts ends the wait with one line
        ray.get(self.topology.learner.publish.remote(), timeout=120)

    def release(self) -> None:
        """Hand out chunks again after :meth:`hold`."""
        if self.holding:
            self.holding = self._actors_held = False
            for i in range(self.topology.num_actors):
                self._start_actor(i)
            self._start_learner()

    def _collect(self, ref: Any, window: Window) -> dict[str, Any] | None:
        """One finished chunk: count it and reissue the work; return the learner's stats if it was his."""
        kind, i = self.pending.pop(ref)
        E = self.cfg.actors.envs_per_actor
        try:
            res = ray.get(ref)
        except (RayActorError, RayTaskError) as e:
            inner = getattr(e, "cause", None)
            if kind == "actor" and isinstance(inner, EnvContractError):
                self.env_failure = self.stop_reason = str(inner)  # restarting would only meet it again
                return None
            if kind == "actor":
                self.supervisor.restart_actor(i, e)
                self.chunk[i] = first_actor_chunk(E)
                self._start_actor(i)
            else:
                self.supervisor.restart_learner(e, self.checkpointer.learner_state)
                self._start_learner()
            return None
        if kind == "actor":
            if self.startup is not None and "first env step" not in self.startup.marks:
                self.startup.mark("workers", res["started_at"])
                self.startup.mark("first env step", res["started_at"])
                self.console.message(f"start-up: first env step {self.startup.since_start('first env step'):.1f} s "
                                     "after the command (" + ", ".join(f"{k} {v:.1f} s" for k, v in
                                                                       self.startup.parts() if v >= 0.05) + ")")
            self.progress.on_actor(i, res)
            self.supervisor.actor_ok(i)
            window.steps += res["env_steps"]
            budget = self.cfg.stop.max_env_steps
            if budget is not None and self.progress.env_steps >= budget:
                self.next_report = time.monotonic()  # report and stop now, not a report interval of steps later
            self.chunk[i] = next_actor_chunk(res, E)
            self._start_actor(i)
            return None
        self.supervisor.learner_ok()
        self.progress.updates = res["total_updates"]
        window.add_learner(res)
        if res["consecutive_skips"] >= self.cfg.learner.max_consecutive_skips:
            raise TrainingError(f"{res['consecutive_skips']} learner updates in a row had a "
                                "non-finite loss or gradient; lower learner.lr or check rewards")
        self._start_learner()
        return res

    def run(self) -> TrainResult:
        """Train until a stop condition (or Ctrl-C / SIGTERM), then drain, evaluate and checkpoint."""
        self.start()
        try:
            self.advance()
        except KeyboardInterrupt:
            self.stop_reason = "interrupted"
            self.console.message("interrupted: writing a final checkpoint (Ctrl-C again to stop at once)")
        result = self.finish()
        if self.env_failure:
            raise TrainingError(f"{self.env_failure}; final checkpoint: {result.checkpoint}")
        return result

    def start(self) -> None:
        """Hand out the first chunks; the clock starts here."""
        cfg = self.cfg
        self.t_start = time.monotonic()
        for i in range(self.topology.num_actors):
            self._start_actor(i)
        self._start_learner()
        self.eval_future: Future[dict[str, Any]] | None = None  # an evaluation running on the driver's thread
        self.next_eval = self.t_start + cfg.evaluation.interval_s
        self.next_report = self.t_start + cfg.logging.report_interval_s
        self.window = Window(self.t_start)
        self.last_learner: dict[str, Any] = {}
        self.last_record: dict[str, Any] = {}
        self.eval_returns: list[float] | None = None
        self.stop_reason = ""
        self.env_failure = ""  # a broken env contract (NaN rewards...): stop, checkpoint, then say so

    def elapsed(self) -> float:
        return time.monotonic() - self.t_start

    def advance(self, duration_s: float = float("inf")) -> None:
        """Run the loop for ``duration_s`` seconds or until a stop condition holds (``stop_reason``)."""
        cfg, topology, progress = self.cfg, self.topology, self.progress
        until = time.monotonic() + duration_s
        while not self.stop_reason and time.monotonic() < until:
            timeout = max(0.0, min(self.next_report, until) - time.monotonic())
            if self.eval_future is not None:
                timeout = min(timeout, 0.02)  # look at the evaluation thread often
            ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=timeout)
            for ref in ready:
                self.last_learner = self._collect(ref, self.window) or self.last_learner
            if self.eval_future is not None and self.eval_future.done():
                returns = self.take_evaluation(self.eval_future.result)
                self.eval_future = None
                if returns:
                    self.eval_returns = returns
                    if self.stop.target_reached(returns):
                        self.next_report = time.monotonic()  # report and stop now, not at the next tick
            now = time.monotonic()
            if topology.evaluator is not None and self.eval_future is None and now >= self.next_eval \
                    and progress.updates > 0:
                self.eval_future = topology.evaluator.submit()
                self.next_eval = now + cfg.evaluation.interval_s
            if now >= self.next_report:
                self._report(now)
            if not self.stop_reason:
                self.checkpointer.poll()

    def _report(self, now: float) -> None:
        self.next_report = now + self.cfg.logging.report_interval_s
        self.start_watch.poll()
        self.supervisor.check_shards(self.checkpointer.replay_snapshot)
        record = self.reporter.report(now - self.t_start, self.window, self.last_learner, self.eval_returns,
                                      self.memory.last_mb if self.memory and self.memory.last else None)
        self.last_record = record
        self.stop_reason = self.stop.check(self.eval_returns, record["time_s"], self.progress.env_steps,
                                           now - self.t_start, self.progress.low_exploration_returns())
        self.eval_returns = None
        self.window = Window(now)
        every = self.cfg.checkpoint.every_reports
        if every and self.progress.reports % every == 0 and not self.stop_reason:
            self.checkpointer.periodic(now - self.t_start)

    def finish(self) -> TrainResult:
        """Drain the chunks in flight, evaluate if the run has no evaluation yet, report, checkpoint."""
        progress, stop_reason = self.progress, self.stop_reason or "stopped"
        if not self.env_failure:  # that one is said once, with the final checkpoint, by the caller
            self.console.message(f"stopping: {stop_reason}")
        last_learner = self._drain(self.window) or self.last_learner
        final_eval = None
        if self.eval_future is not None and stop_reason != "interrupted":  # let it finish (it owns the network)
            final_eval = self.take_evaluation(functools.partial(self.eval_future.result, timeout=300)) or None
        if progress.last_eval is None and stop_reason != "interrupted":
            final_eval = self._final_evaluation()
        elapsed = self.elapsed()
        mem = self.memory
        if mem is not None:
            mem.sample()
        footprint = {"startup_s": self.startup.since_start("first env step") if self.startup else None,
                     "peak_memory_mb": round(mem.peak_mb, 1) if mem and mem.peak else None}
        self.reporter.report(elapsed, self.window, last_learner, final_eval, mem.last_mb if mem else None, footprint)
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
        """The returns of an evaluation, recorded as the last and best (empty if it failed: logged,
        training goes on)."""
        try:
            res = result()
        except Exception as e:  # noqa: BLE001 - an evaluation error must not cost the run or its checkpoint
            log.warning("evaluation failed: %s", cause(e))
            return []
        returns: list[float] = res["eval_returns"]
        before = self.progress.best_eval
        self.progress.on_evaluation(returns)
        if returns and "weights" in res and (before is None or self.progress.last_eval > before):
            try:
                self.checkpointer.best(res, self.elapsed())
            except (OSError, RayActorError, RayTaskError, GetTimeoutError) as e:
                log.warning("could not keep the best evaluation's weights: %s", e)
        return returns

    def _final_evaluation(self) -> list[float] | None:
        """A run that ended before its first periodic evaluation still reports how its policy plays."""
        if self.topology.evaluator is None or self.progress.updates == 0:
            return None
        return self.take_evaluation(self.topology.evaluator.evaluate) or None

    def _drain(self, window: Window) -> dict[str, Any] | None:
        """Let in-flight chunks finish (bounded) so their counters land in the final report and checkpoint;
        return the learner's last statistics if it answered."""
        for shard in self.topology.shards:
            shard.stop_rate_limiting.remote()  # the learner has stopped: let actors finish their chunk
        refs = list(self.pending)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=10.0)
        learner = None
        for ref in ready:
            kind, i = self.pending[ref]
            try:
                res = ray.get(ref)
            except (RayActorError, RayTaskError):
                continue
            if kind == "actor":
                self.progress.on_actor(i, res)
                window.steps += res["env_steps"]
            else:
                self.progress.updates = res["total_updates"]
                window.updates += res["updates"]
                learner = res
        return learner


__all__ = ["ClusterError", "Loop", "TrainResult", "TrainingError", "auto_num_actors", "default_run_dir", "init_ray",
           "run_name", "train"]
