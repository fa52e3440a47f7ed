"""The driver: builds the Ape-X topology on Ray, runs the report loop, evaluates, checkpoints, stops.

    actors (N) --batches--> replay shards (S) <--sample/update-- learner --weights--> parameter server
                                                                                  ^-- actors pull

The driver never touches experience: it reissues work in chunks (``actor.run``, ``learner.train``),
collects their statistics, and writes one report every ``logging.report_interval_s`` seconds.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from apexrl import checkpoint as ckpt
from apexrl.config import Config, dump_yaml, flatten, to_dict
from apexrl.envs import check_env, is_atari
from apexrl.envs.scores import human_normalized_score
from apexrl.metrics import Console, MetricsWriter
from apexrl.replay.rate_limiter import default_error_buffer, default_max_lead
from apexrl.runtime.evaluator import DriverEvaluator

log = logging.getLogger(__name__)
ModelFactory = Callable[[gym.Space, gym.Space], torch.nn.Module]


MAX_ACTOR_FAILURES_IN_ROW = 3


ACTOR_CHUNK_S = 0.25


def first_actor_chunk(envs_per_actor: int) -> int:
    """Vector steps of an actor's first ``run`` call, before its speed is known (~256 env steps)."""
    return max(1, 256 // envs_per_actor)


def next_actor_chunk(res: dict[str, Any], envs_per_actor: int) -> int:
    """Vector steps for ~ACTOR_CHUNK_S of acting at the speed the last chunk ran: long enough that a Ray
    call per chunk costs the actor (and the driver) little, short enough that a dead actor is noticed and
    the report stays current."""
    per_step = res["time_s"] / max(1, res["env_steps"] // envs_per_actor)
    return int(np.clip(ACTOR_CHUNK_S / max(per_step, 1e-6), 1, 10_000))


def _cause(err: BaseException) -> str:
    """The user-relevant line of a Ray error: the original exception, not Ray's wrapper text."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        text = f"{type(cause).__name__}: {cause}".strip().splitlines()[0]
    else:
        lines = [x.strip() for x in str(err).splitlines() if x.strip()]
        text = lines[-1] if lines else type(err).__name__
        if isinstance(err, RayActorError) and "Worker exit detail: " in text:  # killed, not an exception
            text = "its process died (" + text.split("Worker exit detail: ")[1].split(".")[0] + ")"
    return text if len(text) <= 200 else text[:197] + "..."


class ClusterError(RuntimeError):
    """Ray could not be started or reached; the message says how to fix it."""


class TrainingError(RuntimeError):
    """The run had to stop (e.g. repeated non-finite updates); the message says why."""


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


def run_name(cfg: Config) -> str:
    env = cfg.env.id.replace("/", "-")
    return cfg.name or f"{env}__s{cfg.seed}__{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def init_ray(address: str | None, num_cpus: int, dashboard: bool = False) -> bool:
    """Start a private loopback Ray (no address) or join a cluster; return whether we started it."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": True}
    if address is None:
        # Loopback only, dashboard off unless asked: an exposed Ray dashboard/jobs API runs anyone's code.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=dashboard,
                 _node_ip_address="127.0.0.1", **kwargs)
        return True
    _check_reachable(address)
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ClusterError(f"cannot reach a Ray cluster at --address {address} ({first}); start one with "
                           "'ray start --head --port=6379' and pass --address auto or HOST:6379") from None
    return True


def _check_reachable(address: str) -> None:
    """Fail in seconds with a clear message instead of letting ray.init retry for minutes."""
    import socket

    target = address
    if address == "auto":
        target = os.environ.get("RAY_ADDRESS", "")
        if not target:
            current = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray" / "ray_current_cluster"
            target = current.read_text().strip() if current.exists() else ""
        if not target:
            raise ClusterError("--address auto found no running Ray cluster on this machine; start one with "
                               "'ray start --head --port=6379' (or pass --address HOST:6379)")
    if target.startswith(("ray://", "http://", "https://")):
        return
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"--address {address}: expected 'auto' or HOST:PORT such as 10.0.0.1:6379")
    try:
        with socket.create_connection((host, int(port)), timeout=5.0):
            pass
    except OSError as e:
        raise ClusterError(f"cannot reach a Ray cluster at --address {address} ({target}: {e.strerror or e}); "
                           "start one with 'ray start --head --port=6379' and check host, port and firewall") from None


def _ship_by_value(fn: Any) -> None:
    """User code (a model factory in a script or notebook module) may not be importable on the workers:
    let Ray pickle its module by value instead of by name."""
    mod = sys.modules.get(getattr(fn, "__module__", "") or "")
    if mod is None or mod.__name__ in ("__main__", "builtins") or mod.__name__.split(".")[0] == "apexrl":
        return
    try:
        ray.cloudpickle.register_pickle_by_value(mod)
    except Exception as e:  # pragma: no cover - e.g. a C extension module
        log.debug("cannot ship %s by value: %s", mod.__name__, e)


def auto_num_actors(cfg: Config, cluster_cpus: float) -> int:
    """Actors fill the CPUs the learner does not take (at least one)."""
    if cfg.actors.num_actors is not None:
        return cfg.actors.num_actors
    per = max(cfg.actors.num_cpus, 1e-3)
    return max(1, int((cluster_cpus - cfg.learner.num_cpus) // per))


def _strategy(cfg: Config) -> str:
    return "SPREAD" if cfg.actors.placement == "spread" else "DEFAULT"


def _shard_strategy(cfg: Config, i: int) -> Any:
    """Shards take no CPU, and Ray spreads zero-resource actors only best effort (two shards often
    shared a node); under ``spread`` shard i is pinned to the i-th alive node. Hard affinity: a soft one
    still put both shards of a 3-node test cluster on one node in 2 of 4 runs. A shard whose node goes
    is replaced by the driver's shard check on a node alive then."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if cfg.actors.placement != "spread":
        return _strategy(cfg)
    nodes = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
    return NodeAffinitySchedulingStrategy(nodes[i % len(nodes)], soft=False) if nodes else _strategy(cfg)


class _Topology:
    """Creates and holds the Ray actors of one run."""

    def __init__(self, cfg: Config, obs_space: gym.Space, act_space: gym.Space, num_actors: int,
                 model_factory: ModelFactory | None) -> None:
        from apexrl.runtime.transport import ParameterServer
        from apexrl.runtime.workers import (
            ActorWorker,
            LearnerWorker,
            ReplayShardWorker,
            default_batches_per_request,
        )

        r = cfg.replay
        self.cfg, self.num_actors, self.model_factory = cfg, num_actors, model_factory
        self.ps = ParameterServer.remote()
        per_shard = r.capacity // r.num_shards
        frames = is_atari(cfg.env) and cfg.env.frame_stack > 1 and _frames_supported()
        spi = r.samples_per_insert
        buffer, lead = 0.0, None
        if spi is not None:
            k = default_batches_per_request(cfg)
            buffer = r.spi_error_buffer if r.spi_error_buffer is not None else default_error_buffer(
                spi, cfg.learner.batch_size, cfg.learner.prefetch * k, cfg.actors.send_every)
            lead = (r.spi_max_lead / r.num_shards if r.spi_max_lead is not None
                    else default_max_lead(cfg.learner.batch_size, k))
        self._shard_cls = ReplayShardWorker
        self._shard_kwargs = dict(capacity=per_shard, alpha=r.alpha, min_size=max(1, r.learning_starts // r.num_shards),
                                  frames=frames, samples_per_insert=spi, error_buffer=buffer / r.num_shards,
                                  max_lead=lead, batch_size=cfg.learner.batch_size)
        self.shards = [self.make_shard(i) for i in range(r.num_shards)]
        self.learner = LearnerWorker.options(num_cpus=cfg.learner.num_cpus, num_gpus=cfg.learner.num_gpus).remote(
            cfg, obs_space, act_space, self.shards, self.ps, model_factory,
            threads=max(1, int(cfg.learner.num_cpus)))
        self._actor_cls = ActorWorker
        self.actors = [self._make_actor(i) for i in range(num_actors)]
        self.evaluator = (DriverEvaluator(cfg, obs_space, act_space, self.ps, model_factory)
                          if cfg.evaluation.interval_s > 0 else None)

    def make_shard(self, i: int) -> Any:
        return self._shard_cls.options(scheduling_strategy=_shard_strategy(self.cfg, i)).remote(
            seed=self.cfg.seed * 101 + i, **self._shard_kwargs)

    def _make_actor(self, i: int) -> Any:
        return self._actor_cls.options(num_cpus=self.cfg.actors.num_cpus,
                                       scheduling_strategy=_strategy(self.cfg)).remote(
            self.cfg, i, self.num_actors, self.shards, self.ps, self.model_factory)

    def kill(self) -> None:
        for a in [*self.actors, self.learner, *self.shards, self.ps]:
            if a is not None:
                try:
                    ray.kill(a)
                except Exception:  # pragma: no cover - already gone
                    pass


def _frames_supported() -> bool:
    try:
        import apexrl.replay.frames  # noqa: F401
    except ImportError:
        return False
    return True


def _truncate_metrics(path: Path, env_steps: int) -> None:
    """On resume, drop report lines written after the checkpoint so the curve has no repeats."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line).get("env_steps", 0) <= env_steps:
                keep.append(line)
        except json.JSONDecodeError:
            continue
    path.write_text("".join(x + "\n" for x in keep))


def train(cfg: Config, model_factory: ModelFactory | None = None, run_dir: str | os.PathLike[str] | None = None,
          address: str | None = None, resume: str | os.PathLike[str] | None = None, dashboard: bool = False,
          console: Console | None = None, runs_root: str | os.PathLike[str] = "runs") -> TrainResult:
    """Train Ape-X with ``cfg``; a custom ``model_factory(obs_space, action_space) -> nn.Module`` returning
    Q-values replaces the built-in network. Blocks until a stop condition; returns a summary."""
    obs_space, act_space = check_env(cfg.env)  # fail before any run dir or Ray exists
    resume_state: dict[str, Any] | None = None
    resume_path: Path | None = None
    if resume is not None:
        resume_path, resume_state = ckpt.load_latest(Path(resume))
        rdir = Path(resume)
    else:
        rdir = Path(run_dir) if run_dir is not None else Path(runs_root) / run_name(cfg)
    console = console or Console(cfg.logging.console)

    host_cpus = max(os.cpu_count() or 1, 1)
    # A private Ray gets as many logical CPUs as the run asks for (the OS shares the cores), decided before
    # ray.init: a restart to fix it afterwards cost ~4 s of start-up.
    local_cpus = max(host_cpus, int(math.ceil(auto_num_actors(cfg, host_cpus) * cfg.actors.num_cpus
                                              + cfg.learner.num_cpus)))
    started_ray = init_ray(address, num_cpus=local_cpus, dashboard=dashboard)
    previous_sigterm = _sigterm_as_interrupt()  # after ray.init, which installs its own (aborting) handler
    topo: _Topology | None = None
    try:
        cluster_cpus = float(ray.cluster_resources().get("CPU", host_cpus))
        num_actors = auto_num_actors(cfg, host_cpus if started_ray and address is None else cluster_cpus)
        rdir.mkdir(parents=True, exist_ok=True)
        (rdir / "config.yaml").write_text(dump_yaml(cfg))
        if model_factory is not None:
            _ship_by_value(model_factory)
        topo = _Topology(cfg, obs_space, act_space, num_actors, model_factory)
        loop = _Loop(cfg, topo, rdir, console, resume_state, resume_path)
        return loop.run()
    finally:
        if topo is not None:
            topo.kill()
        if started_ray:
            ray.shutdown()
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)


def _sigterm_as_interrupt() -> Any:
    """SIGTERM (a scheduler's or a preemptible VM's stop) takes the same path as Ctrl-C: final checkpoint,
    bounded shutdown. Returns the previous handler, or None off the main thread (nothing installed)."""
    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM stops at once
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return None


class _Loop:
    def __init__(self, cfg: Config, topo: _Topology, run_dir: Path, console: Console,
                 resume_state: dict[str, Any] | None, resume_path: Path | None) -> None:
        self.cfg, self.topo, self.run_dir, self.console = cfg, topo, run_dir, console
        self.env_steps = 0
        self.episodes = 0
        self.updates = 0
        self.time_offset = 0.0
        self.reports = 0
        self.best_eval: float | None = None
        self.last_eval: float | None = None
        self.time_to_target: float | None = None
        self.steps_to_target: int | None = None
        self.recent_returns: deque[float] = deque(maxlen=100)
        self.actor_returns: dict[int, deque[float]] = {i: deque(maxlen=20) for i in range(topo.num_actors)}
        self.actor_eps: dict[int, float] = {}
        self.actor_restarts = 0
        self.actor_dropped: dict[int, int] = {}  # batches lost to a dead shard, per live actor process
        self.shard_restarts = 0
        self.fail_streak: dict[int, int] = {i: 0 for i in range(topo.num_actors)}
        self.replay_snapshot: list[dict[str, Any]] | None = None
        if resume_state is not None:
            c = resume_state["counters"]
            self.env_steps, self.episodes, self.updates = c["env_steps"], c["episodes"], c["learner_updates"]
            self.time_offset, self.reports = c["time_s"], c["reports"]
            self.best_eval = c.get("best_eval")
            try:
                ray.get(topo.learner.load_state_dict.remote(resume_state["learner"]))
            except RayTaskError as e:
                raise ckpt.CheckpointError(
                    f"checkpoint '{resume_path}' does not fit this config's network ({_cause(e)}); resume with "
                    "the run's own network settings, or start a new run") from None
            if resume_state.get("replay") and len(resume_state["replay"]) == len(topo.shards):
                ray.get([s.load_state_dict.remote(st) for s, st in zip(topo.shards, resume_state["replay"])])
                self.replay_snapshot = resume_state["replay"]
            _truncate_metrics(run_dir / "metrics.jsonl", self.env_steps)
            console.message(f"resumed from {resume_path} at {self.env_steps:,} env steps, "
                            f"{self.updates:,} updates")
        self.metrics = MetricsWriter(run_dir, cfg.logging.tensorboard,
                                     purge_step=self.env_steps if resume_state is not None else None)
        if resume_state is None:
            self.metrics.hparams(flatten(to_dict(cfg)))
        self.last_ckpt: Path | None = resume_path
        self._ckpt_inflight: dict[str, Any] | None = None  # a periodic checkpoint's state requests

    # -- the loop -----------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        cfg, topo = self.cfg, self.topo
        t_start = time.monotonic()
        steps_per_call = {i: first_actor_chunk(cfg.actors.envs_per_actor) for i in range(topo.num_actors)}
        pending: dict[Any, tuple[str, int]] = {}
        for i, a in enumerate(topo.actors):
            pending[a.run.remote(steps_per_call[i])] = ("actor", i)
        learner_chunk = min(1.0, cfg.logging.report_interval_s / 2)
        pending[topo.learner.train.remote(learner_chunk)] = ("learner", 0)
        eval_future: Future[dict[str, Any]] | None = None  # an evaluation running on the driver's thread
        next_eval = t_start + cfg.evaluation.interval_s
        next_report = t_start + cfg.logging.report_interval_s
        window = {"steps": 0, "updates": 0, "learn_time": 0.0, "idle": 0.0, "sums": {}, "n": 0, "t": t_start}
        last_learner: dict[str, Any] = {}
        eval_returns: list[float] | None = None
        stop_reason = ""
        s = cfg.stop
        try:
            while not stop_reason:
                timeout = max(0.0, next_report - time.monotonic())
                if eval_future is not None:
                    timeout = min(timeout, 0.02)  # look at the evaluation thread often
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=timeout)
                for ref in ready:
                    kind, i = pending.pop(ref)
                    try:
                        res = ray.get(ref)
                    except (RayActorError, RayTaskError) as e:
                        if kind == "actor":
                            self._restart_actor(i, e)
                            steps_per_call[i] = first_actor_chunk(cfg.actors.envs_per_actor)
                            pending[topo.actors[i].run.remote(steps_per_call[i])] = ("actor", i)
                            continue
                        raise
                    if kind == "actor":
                        self._on_actor(i, res)
                        self.fail_streak[i] = 0
                        window["steps"] += res["env_steps"]
                        steps_per_call[i] = next_actor_chunk(res, cfg.actors.envs_per_actor)
                        pending[topo.actors[i].run.remote(steps_per_call[i])] = ("actor", i)
                    elif kind == "learner":
                        last_learner = res
                        self.updates = res["total_updates"]
                        window["updates"] += res["updates"]
                        window["learn_time"] += res["time_s"] + res["gap_s"]
                        window["idle"] += res["idle_s"] + res["gap_s"]
                        if res["updates"]:
                            for k in ("loss", "q_mean", "td_abs_mean", "grad_norm", "is_weight_mean"):
                                if k in res:
                                    window["sums"][k] = window["sums"].get(k, 0.0) + res[k] * res["updates"]
                            window["n"] += res["updates"]
                        if res["consecutive_skips"] >= cfg.learner.max_consecutive_skips:
                            raise TrainingError(f"{res['consecutive_skips']} learner updates in a row had a "
                                                "non-finite loss or gradient; lower learner.lr or check rewards")
                        pending[topo.learner.train.remote(learner_chunk)] = ("learner", 0)
                if eval_future is not None and eval_future.done():
                    returns = self._take_evaluation(eval_future.result)
                    eval_future = None
                    if returns:
                        eval_returns = returns
                        if s.target_return is not None and float(np.mean(returns)) >= s.target_return:
                            next_report = time.monotonic()  # report and stop now, not at the next tick
                now = time.monotonic()
                if topo.evaluator is not None and eval_future is None and now >= next_eval and self.updates > 0:
                    eval_future = topo.evaluator.submit()
                    next_eval = now + cfg.evaluation.interval_s
                if now >= next_report:
                    next_report = now + cfg.logging.report_interval_s
                    self._check_shards()
                    record = self._report(now - t_start, window, last_learner, eval_returns)
                    if eval_returns is not None and s.target_return is not None and \
                            float(np.mean(eval_returns)) >= s.target_return:
                        self.time_to_target = record["time_s"]
                        self.steps_to_target = self.env_steps
                        stop_reason = f"evaluation mean {np.mean(eval_returns):.1f} >= target {s.target_return}"
                    eval_returns = None
                    window = {"steps": 0, "updates": 0, "learn_time": 0.0, "idle": 0.0, "sums": {}, "n": 0,
                              "t": now}
                    if s.max_env_steps is not None and self.env_steps >= s.max_env_steps:
                        stop_reason = f"reached {s.max_env_steps:,} env steps"
                    if s.max_time_s is not None and now - t_start >= s.max_time_s:
                        stop_reason = f"reached {s.max_time_s:g} s"
                    if cfg.checkpoint.every_reports and self.reports % cfg.checkpoint.every_reports == 0 \
                            and not stop_reason and self.updates > 0 and self._ckpt_inflight is None:
                        self._ckpt_inflight = self._request_state()
                if self._ckpt_inflight is not None and not stop_reason:
                    refs = [self._ckpt_inflight["learner"], *self._ckpt_inflight.get("replay", [])]
                    if len(ray.wait(refs, num_returns=len(refs), timeout=0)[0]) == len(refs):
                        try:
                            self._save_state(self._ckpt_inflight, time.monotonic() - t_start)
                        except (RayActorError, RayTaskError) as e:  # a replaced shard: the next one will do
                            log.warning("periodic checkpoint skipped: %s", _cause(e))
                        self._ckpt_inflight = None
        except KeyboardInterrupt:
            stop_reason = "interrupted"
            self.console.message("interrupted: writing a final checkpoint (Ctrl-C again to stop at once)")
        self.console.message(f"stopping: {stop_reason}")
        last_learner = self._drain(pending, window) or last_learner
        final_eval = None
        if eval_future is not None and stop_reason != "interrupted":  # let it finish (it owns the network)
            final_eval = self._take_evaluation(functools.partial(eval_future.result, timeout=300)) or None
        if self.last_eval is None and stop_reason != "interrupted":
            final_eval = self._final_evaluation()
        elapsed = time.monotonic() - t_start
        self._report(elapsed, window, last_learner, final_eval)
        path = self._checkpoint(elapsed)
        self.metrics.close()
        self.console.message(f"checkpoint: {path}")
        return TrainResult(
            run_dir=self.run_dir, env_steps=self.env_steps, learner_updates=self.updates,
            time_s=self.time_offset + elapsed, eval_return_mean=self.last_eval, best_eval_return=self.best_eval,
            reached_target=self.time_to_target is not None, stop_reason=stop_reason, checkpoint=path,
            time_to_target_s=self.time_to_target, env_steps_to_target=self.steps_to_target,
        )

    def _take_evaluation(self, result: Callable[[], dict[str, Any]]) -> list[float]:
        """The returns of an evaluation, recorded as the last and best (empty if it failed: logged,
        training goes on)."""
        try:
            res = result()
        except Exception as e:  # noqa: BLE001 - an evaluation error must not cost the run or its checkpoint
            log.warning("evaluation failed: %s", _cause(e))
            return []
        returns: list[float] = res["eval_returns"]
        if returns:
            self.last_eval = float(np.mean(returns))
            self.best_eval = self.last_eval if self.best_eval is None else max(self.best_eval, self.last_eval)
        return returns

    def _final_evaluation(self) -> list[float] | None:
        """A run that ended before its first periodic evaluation still reports how its policy plays."""
        if self.topo.evaluator is None or self.updates == 0:
            return None
        return self._take_evaluation(self.topo.evaluator.evaluate) or None

    def _drain(self, pending: dict[Any, tuple[str, int]], window: dict[str, Any]) -> dict[str, Any] | None:
        """Let in-flight chunks finish (bounded) so their counters land in the final report and checkpoint;
        return the learner's last statistics if it answered."""
        for shard in self.topo.shards:
            shard.stop_rate_limiting.remote()  # the learner has stopped: let actors finish their chunk
        refs = list(pending)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=10.0)
        learner = None
        for ref in ready:
            kind, i = pending[ref]
            try:
                res = ray.get(ref)
            except (RayActorError, RayTaskError):
                continue
            if kind == "actor":
                self._on_actor(i, res)
                window["steps"] += res["env_steps"]
            elif kind == "learner":
                self.updates = res["total_updates"]
                window["updates"] += res["updates"]
                learner = res
        return learner

    def _on_actor(self, i: int, res: dict[str, Any]) -> None:
        self.env_steps += res["env_steps"]
        self.episodes += len(res["episode_returns"])
        self.recent_returns.extend(res["episode_returns"])
        self.actor_returns[i].extend(res["episode_returns"])
        self.actor_eps[i] = float(np.mean(res["epsilons"]))
        self.actor_dropped[i] = int(res.get("dropped_sends", 0))

    def _restart_actor(self, i: int, err: Exception) -> None:
        """Replace a dead or failing actor with a fresh one of the same index (same epsilons, same seed);
        an actor that fails again before finishing any work is a crash loop, and stops the run."""
        self.actor_restarts += 1
        self.fail_streak[i] += 1
        cause = _cause(err)
        if self.fail_streak[i] > MAX_ACTOR_FAILURES_IN_ROW:
            raise TrainingError(f"actor {i} failed {self.fail_streak[i]} times in a row without completing any "
                                f"work; giving up. Last error: {cause}")
        log.warning("actor %d failed (%s); restarting it with the same index and epsilon", i, cause)
        self.console.message(f"actor {i} failed ({cause}); restart #{self.actor_restarts}")
        try:
            ray.kill(self.topo.actors[i])
        except Exception:  # already gone
            pass
        self.topo.actors[i] = self.topo._make_actor(i)

    def _check_shards(self) -> None:
        """Replace dead replay shards (from the last replay snapshot when one exists, else empty) and
        point the learner and actors at the new set; the run goes on with the survivors meanwhile."""
        refs = [s.stats.remote() for s in self.topo.shards]
        replaced = False
        for j, ref in enumerate(refs):
            try:
                ray.get(ref, timeout=30.0)
                continue
            except (RayActorError, RayTaskError, GetTimeoutError) as e:
                cause = _cause(e)
            self.shard_restarts += 1
            new = self.topo.make_shard(j)
            snapshot = self.replay_snapshot[j] if self.replay_snapshot and j < len(self.replay_snapshot) else None
            if snapshot is not None:
                ray.get(new.load_state_dict.remote(snapshot))
                how = "restored from the last replay snapshot"
            else:
                how = "empty (no replay snapshot; set checkpoint.replay=true to keep one)"
            log.warning("replay shard %d died (%s); replacement started %s", j, cause, how)
            self.console.message(f"replay shard {j} died; replacement started {how}")
            try:
                ray.kill(self.topo.shards[j])
            except Exception:
                pass
            self.topo.shards[j] = new
            replaced = True
        if replaced:
            self.topo.learner.set_shards.remote(self.topo.shards)
            for a in self.topo.actors:
                a.set_shards.remote(self.topo.shards)

    def _report(self, elapsed: float, w: dict[str, Any], learner: dict[str, Any],
                eval_returns: list[float] | None) -> dict[str, Any]:
        self.reports += 1
        dt = max(1e-9, time.monotonic() - w["t"])
        rec: dict[str, Any] = {
            "time_s": round(self.time_offset + elapsed, 3),
            "env_steps": self.env_steps,
            "learner_updates": self.updates,
            "episodes": self.episodes,
            "train_return_mean": float(np.mean(self.recent_returns)) if self.recent_returns else None,
            "env_steps_per_s": w["steps"] / dt,
            "updates_per_s": w["updates"] / dt,
            "learner_idle_fraction": (w["idle"] / w["learn_time"]) if w["learn_time"] > 0 else None,
            "replay_size": learner.get("replay_size"),
            "replay_inserted": learner.get("replay_inserted"),
            "beta": learner.get("beta"),
            "skipped_updates": learner.get("skipped_updates", 0),
            "actor_restarts": self.actor_restarts,
            "shard_restarts": self.shard_restarts,
            "dropped_sends": sum(self.actor_dropped.values()),
        }
        if w["n"]:
            rec.update({k: v / w["n"] for k, v in w["sums"].items()})
        if eval_returns is not None:
            rec["eval_return_mean"] = float(np.mean(eval_returns))
            rec["eval_return_std"] = float(np.std(eval_returns))
            hns = human_normalized_score(self.cfg.env.id, rec["eval_return_mean"])
            if hns is not None and is_atari(self.cfg.env):
                rec["eval_hns"] = hns
        for i in range(self.topo.num_actors):
            if i in self.actor_eps:
                rec[f"actor{i}_epsilon"] = self.actor_eps[i]
            if self.actor_returns[i]:
                rec[f"actor{i}_return_mean"] = float(np.mean(self.actor_returns[i]))
        self.metrics.write(rec, step=self.env_steps)
        self.console.update({**rec, "eval_return_mean_last": self.last_eval})
        return rec

    def _request_state(self) -> dict[str, Any]:
        """Ask the learner and the shards for their state without waiting: the learner answers after its
        current chunk (up to a second), and a driver blocked meanwhile would hand out no new actor chunks,
        so the actors stop, the rate limiter stops the learner, and a checkpoint cost a window of idling."""
        refs: dict[str, Any] = {"learner": self.topo.learner.state_dict.remote()}
        if self.cfg.checkpoint.replay:
            refs["replay"] = [s.state_dict.remote() for s in self.topo.shards]
        return refs

    def _checkpoint(self, elapsed: float) -> Path:
        return self._save_state(self._request_state(), elapsed)

    def _save_state(self, refs: dict[str, Any], elapsed: float) -> Path:
        learner = ray.get(refs["learner"])
        state: dict[str, Any] = {
            "learner": learner,
            "counters": {
                # the learner's state may be a chunk ahead of the driver's count
                "env_steps": self.env_steps, "episodes": self.episodes,
                "learner_updates": max(self.updates, int(learner.get("updates", 0))),
                "time_s": self.time_offset + elapsed, "reports": self.reports, "best_eval": self.best_eval,
            },
            "config": to_dict(self.cfg),
            "num_actors": self.topo.num_actors,
        }
        if "replay" in refs:
            try:
                state["replay"] = ray.get(refs["replay"], timeout=300)
                self.replay_snapshot = state["replay"]
            except (RayActorError, RayTaskError, GetTimeoutError) as e:
                # A shard died (or went unreachable) as it was asked: keep the learner's state, and the last
                # complete replay snapshot if there is one, rather than lose the checkpoint.
                if self.replay_snapshot is not None and len(self.replay_snapshot) == len(refs["replay"]):
                    state["replay"] = self.replay_snapshot
                log.warning("checkpoint at %d env steps: a replay shard did not answer (%s); saved %s",
                            self.env_steps, _cause(e),
                            "the previous replay snapshot" if "replay" in state else "without replay contents")
        self.last_ckpt = ckpt.save(self.run_dir, state, step=self.env_steps, keep=self.cfg.checkpoint.keep)
        return self.last_ckpt


__all__ = ["ClusterError", "TrainResult", "TrainingError", "auto_num_actors",
           "init_ray", "train"]
