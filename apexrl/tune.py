"""``apexrl tune``: a grid of config values x seeds, each trial a full Ape-X run, on Ray Tune's Tuner.

    apexrl tune cartpole --grid learner.lr=1e-4,3e-4 --seeds 3 --max-env-steps 50000

Nested Ray. A trial is a Tune actor whose function calls :func:`apexrl.runtime.driver.train`; inside it
``ray.is_initialized()`` is already true, so ``train`` joins the Ray that Tune runs on (it neither
starts nor shuts one down) and creates its own learner, shards and actors there.

Resources. Tune reserves a placement group per trial and, by default, captures the trial's child
actors into it. The driver asks for the learner (and the parameter server) with no scheduling
strategy, so they land in the group: one bundle ``{CPU: 1}`` for the trial's driver loop (which also
runs the periodic evaluation, on a thread) and one for the learner (``learner.num_cpus``,
``learner.num_gpus``). Actors and replay shards are created with an explicit strategy (``DEFAULT``/``SPREAD``, from ``actors.placement``) and so are scheduled
outside the group, on free CPUs; hence ``max_concurrent_trials`` is set so that every running trial's
actors fit too: ``floor(cluster CPUs / (1 + learner CPUs + actors x actor CPUs))``.

Each trial writes an ordinary run dir (``OUT/<setting>__s<seed>``) that ``apexrl plot OUT`` draws;
Tune's own bookkeeping goes to ``OUT/_tune``. The table and ``OUT/results.json`` give one row per trial.

Schedulers (``--scheduler``) compare trials at equal wall time (``time_s``, so ``--max-time`` is needed) by
``score``: the best greedy evaluation so far, or the training return before the first evaluation.
``asha`` stops the weaker trials early (ASHA, Li et al., 2020). ``pbt`` (Jaderberg et al., 2017) treats
the trials as a population: every quarter of the budget, the weaker half load the newest checkpoint of a
stronger trial (weights, optimizer, counters, through Tune's checkpoints) and go on with the ``--grid`` keys
perturbed or resampled from their values.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from apexrl import config as C
from apexrl import strict_json
from apexrl.config import Config, ConfigError, to_dict
from apexrl.metrics import Console

DEFAULT_ACTORS = 2  # per trial when the config leaves actors.num_actors to the cluster size
SCHEDULERS = ("fifo", "asha", "pbt")


class TuneError(ValueError):
    """A problem with the tune request itself; the message names it and the fix."""


@dataclass(frozen=True)
class Trial:
    index: int
    label: str  # the grid point, e.g. "learner.lr=0.0001"
    seed: int
    config: dict[str, Any]  # to_dict(Config), validated
    run_dir: str


def parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """``["learner.lr=1e-4,3e-4", "learner.n_step=1,3"]`` -> ``{"learner.lr": [1e-4, 3e-4], ...}``."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not raw.strip():
            raise TuneError(f"--grid '{item}' must look like key=v1,v2,... e.g. --grid learner.lr=1e-4,3e-4")
        if key in grid:
            raise TuneError(f"--grid names '{key}' twice; give all its values in one --grid {key}=v1,v2")
        values = [C.parse_override(f"{key}={v.strip()}")[1] for v in raw.split(",") if v.strip()]
        grid[key] = [_number(v) for v in values]
    return grid


def _number(v: Any) -> Any:
    """YAML reads ``1e-4`` (no dot) as a string; a grid value that looks like a number is one."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def _label(point: dict[str, Any]) -> str:
    text = ",".join(f"{k}={v}" for k, v in point.items()) or "base"
    return re.sub(r"[^A-Za-z0-9_.,=+-]", "_", text)


def make_trials(config: str | None, overrides: Sequence[str], grid: dict[str, list[Any]], seeds: int,
                max_env_steps: int | None, max_time: float | None, out: Path) -> list[Trial]:
    """Validate every (grid point, seed) config up front, before any Ray exists."""
    if seeds < 1:
        raise TuneError(f"--seeds {seeds}: must be >= 1")
    extra = list(overrides)
    if max_env_steps is not None:
        extra.append(f"stop.max_env_steps={max_env_steps}")
    if max_time is not None:
        extra.append(f"stop.max_time_s={max_time}")
    base = C.load(config if config is not None else "cartpole", extra)
    s = base.stop
    if s.max_env_steps is None and s.max_time_s is None and s.target_return is None:
        raise TuneError("each trial needs a budget: give --max-env-steps N or --max-time S "
                        "(or set stop.* in the config)")
    if base.actors.num_actors is None:
        extra.append(f"actors.num_actors={DEFAULT_ACTORS}")
    trials = []
    points = [dict(zip(grid, vals)) for vals in itertools.product(*grid.values())] if grid else [{}]
    for point in points:
        for i in range(seeds):
            seed = base.seed + i
            label = _label(point)
            name = f"{label}__s{seed}"
            cfg = C.load(config if config is not None else "cartpole",
                         extra + [f"{k}={json.dumps(v) if isinstance(v, (list, dict)) else v}"
                                  for k, v in point.items()] + [f"seed={seed}", f"name={name}"])
            trials.append(Trial(len(trials), label, seed, to_dict(cfg), str((out / name).resolve())))
    return trials


def trial_resources(cfg: Config) -> tuple[list[dict[str, float]], float]:
    """(placement-group bundles, CPUs the trial uses in all: bundles plus its actors outside them)."""
    learner = {"CPU": float(cfg.learner.num_cpus)}
    if cfg.learner.num_gpus > 0:
        learner["GPU"] = float(cfg.learner.num_gpus)
    bundles = [{"CPU": 1.0}, learner]
    actors = (cfg.actors.num_actors or DEFAULT_ACTORS) * cfg.actors.num_cpus
    return bundles, 1.0 + cfg.learner.num_cpus + actors


def concurrency(cfg: Config, cluster: dict[str, float]) -> int:
    """Trials that fit side by side (at least one: Tune then just runs them in turn)."""
    _, cpus = trial_resources(cfg)
    n = math.floor(cluster.get("CPU", 1.0) / max(cpus, 1e-9))
    if cfg.learner.num_gpus > 0:
        n = min(n, math.floor(cluster.get("GPU", 0.0) / cfg.learner.num_gpus))
    return max(1, n)


class _TuneConsole(Console):
    """Hands each driver report to Tune (so its progress and schedulers see the run); prints nothing.
    With ``run_dir``, the run's newest checkpoint goes to Tune with each report (for PBT)."""

    KEYS = ("env_steps", "time_s", "learner_updates", "train_return_mean", "env_steps_per_s")

    def __init__(self, run_dir: str | None = None) -> None:
        super().__init__("off")
        self.best: float | None = None
        self.run_dir = run_dir

    def update(self, record: dict[str, Any]) -> None:
        from ray import tune

        record = strict_json.clean(record)  # Tune writes its result.json as JSON too: no NaN tokens
        rec = {k: record[k] for k in self.KEYS if record.get(k) is not None}
        ev = record.get("eval_return_mean")
        if ev is not None:
            rec["eval_return_mean"] = ev
            self.best = ev if self.best is None else max(self.best, ev)
        if self.best is not None:
            rec["best_eval_return"] = self.best
        score = self.best if self.best is not None else rec.get("train_return_mean")
        if score is None:
            return  # schedulers need a score in every result: nothing to report before the first episode
        rec["score"] = score
        newest = self._newest_checkpoint()
        if newest is None:
            tune.report(rec)
            return
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy2(newest, Path(tmp) / newest.name)
            tune.report(rec, checkpoint=tune.Checkpoint.from_directory(tmp))

    def _newest_checkpoint(self) -> Path | None:
        """The run's newest checkpoint, with every report: a function trainable's "save" (what PBT asks
        for when it picks a trial to copy) is the checkpoint of its last report."""
        if self.run_dir is None:
            return None
        from apexrl import checkpoint as ckpt

        found = ckpt.list_checkpoints(Path(self.run_dir))
        return found[-1] if found else None


def _own_index(params: dict[str, Any]) -> int:
    """This Tune trial's index into ``trials``. Not ``params["trial"]`` alone: PBT copies a stronger
    trial's whole config, index included, into a weaker one; the trial's directory keeps its own."""
    from ray import tune

    try:
        trial_dir = tune.get_context().get_trial_dir()
    except Exception:  # outside a Tune session
        trial_dir = None
    return _index_of_dir(trial_dir, params["trial"])


def _index_of_dir(trial_dir: str | None, fallback: int) -> int:
    """The index in a trial directory's name (``trial<i>``, set by ``trial_dirname_creator``), else
    ``fallback``."""
    name = Path(trial_dir).name if trial_dir else ""
    return int(name[len("trial"):]) if re.fullmatch(r"trial\d+", name) else int(fallback)


def _param(key: str) -> str:
    """A --grid key as a Tune config key (PBT mutates these)."""
    return "grid:" + key


def _trainable(params: dict[str, Any], trials: list[Trial], checkpoints: bool = False) -> None:
    """One Tune trial: an ordinary ``train()`` that joins Tune's Ray, then a final report. Under PBT the
    trial starts from the checkpoint Tune hands it (its own, or a stronger trial's) with the grid keys
    Tune chose."""
    import shutil

    from ray import tune

    from apexrl import checkpoint as ckpt
    from apexrl.config import from_dict
    from apexrl.runtime.driver import train

    t = trials[_own_index(params)]
    cfg = from_dict(t.config)
    mutated = {k[len("grid:"):]: v for k, v in params.items() if k.startswith("grid:")}
    if mutated:
        cfg = cfg.replace(**mutated)
    resume = None
    start = tune.get_checkpoint()
    if start is not None:
        own = ckpt.checkpoint_dir(Path(t.run_dir))
        shutil.rmtree(own, ignore_errors=True)  # the newest file must be the one Tune handed over
        own.mkdir(parents=True)
        with start.as_directory() as d:
            for f in Path(d).glob("ckpt-*.pt"):
                shutil.copy2(f, own / f.name)
        resume = t.run_dir
    console = _TuneConsole(t.run_dir if checkpoints else None)
    res = train(cfg, run_dir=None if resume else t.run_dir, resume=resume, console=console)
    best = res.best_eval_return if res.best_eval_return is not None else console.best
    tune.report({"score": best if best is not None else res.eval_return_mean, "env_steps": res.env_steps,
                 "time_s": res.time_s, "learner_updates": res.learner_updates,
                 "eval_return_mean": res.eval_return_mean, "best_eval_return": res.best_eval_return,
                 "stop_reason": res.stop_reason, "run_dir": str(res.run_dir), "final": True})


def check_scheduler(name: str, trials: list[Trial], grid: dict[str, list[Any]]) -> None:
    """TuneError (one line, before any Ray) if ``--scheduler name`` cannot work with these trials."""
    if name not in SCHEDULERS:
        raise TuneError(f"--scheduler {name!r}: choose one of {', '.join(SCHEDULERS)}")
    if name == "fifo":
        return
    if C.from_dict(trials[0].config).stop.max_time_s is None:
        raise TuneError(f"--scheduler {name} compares trials at equal wall time: give --max-time SECONDS")
    if name == "pbt" and not grid:
        raise TuneError("--scheduler pbt perturbs the --grid keys: give at least one, e.g. --grid learner.lr=1e-4,1e-3")
    if name == "pbt" and len(trials) < 2:
        raise TuneError("--scheduler pbt needs a population of at least 2 trials (more --grid values or --seeds)")


def make_scheduler(name: str, trials: list[Trial], grid: dict[str, list[Any]]) -> Any:
    """The Tune scheduler for ``--scheduler`` (None for fifo)."""
    check_scheduler(name, trials, grid)
    if name == "fifo":
        return None
    cfg = C.from_dict(trials[0].config)
    budget = float(cfg.stop.max_time_s)  # type: ignore[arg-type]
    from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining

    if name == "asha":
        return ASHAScheduler(time_attr="time_s", max_t=budget, reduction_factor=3,
                             grace_period=max(budget / 9, 2 * cfg.logging.report_interval_s))
    return PopulationBasedTraining(time_attr="time_s", perturbation_interval=_pbt_interval(cfg),
                                   hyperparam_mutations={_param(k): list(v) for k, v in grid.items()})


def run(trials: list[Trial], out: Path, address: str | None = None, max_concurrent: int | None = None,
        verbose: int = 0, scheduler: str = "fifo", grid: dict[str, list[Any]] | None = None) -> list[dict[str, Any]]:
    """Run every trial on Ray Tune; return one row per trial (in trial order)."""
    try:
        from ray import tune
    except ImportError as e:
        raise TuneError(f"Ray Tune is not installed ({e}); pip install 'ray[tune]'") from None
    import ray

    from apexrl.runtime.cluster import init_ray, shutdown_ray

    os.environ.setdefault("RAY_CHDIR_TO_TRIAL_DIR", "0")  # trials write to absolute run dirs anyway
    grid = grid or {}
    sched = make_scheduler(scheduler, trials, grid)
    if scheduler == "pbt":  # checkpoints at least twice per perturbation interval, for PBT to hand over
        trials = [_with_checkpoints(t) for t in trials]
    cfgs = [C.from_dict(t.config) for t in trials]
    bundles = [trial_resources(c)[0] for c in cfgs]  # per trial: the grid may change actors or learner
    biggest = max(cfgs, key=lambda c: trial_resources(c)[1])
    # A private Ray advertises what the trials ask for (at least the host's cores; the OS shares them).
    wanted = trial_resources(biggest)[1] * (max_concurrent or 1)
    started = init_ray(address, num_cpus=max(os.cpu_count() or 1, math.ceil(wanted)))
    try:
        n = max_concurrent or concurrency(biggest, ray.cluster_resources())
        trainable = tune.with_resources(
            tune.with_parameters(_trainable, trials=trials, checkpoints=scheduler == "pbt"),
            lambda p: tune.PlacementGroupFactory(bundles[p["trial"]]))
        space: dict[str, Any] = {"trial": tune.grid_search([t.index for t in trials])}
        if scheduler == "pbt":  # each trial starts at its grid point; PBT then changes these
            for k in grid:
                space[_param(k)] = tune.sample_from(lambda config, k=k: _dotted(trials[config["trial"]].config, k))
        tuner = tune.Tuner(
            trainable,
            param_space=space,
            tune_config=tune.TuneConfig(max_concurrent_trials=n, scheduler=sched,
                                        metric="score" if sched is not None else None,
                                        mode="max" if sched is not None else None,
                                        trial_dirname_creator=lambda tr: f"trial{tr.config['trial']}"),
            run_config=tune.RunConfig(name="_tune", storage_path=str(out.resolve()), verbose=verbose,
                                      checkpoint_config=tune.CheckpointConfig(num_to_keep=_keep(trials, scheduler)),
                                      failure_config=tune.FailureConfig(max_failures=0)),
        )
        grid = tuner.fit()
        rows: dict[int, dict[str, Any]] = {}
        for r in grid:
            i = _index_of_dir(r.path, r.config["trial"])
            m = dict(r.metrics or {})
            t = trials[i]
            rows[i] = {"config": t.label, "seed": t.seed, "best_eval": m.get("best_eval_return"),
                       "last_eval": m.get("eval_return_mean"), "time_s": m.get("time_s"),
                       "env_steps": m.get("env_steps"), "run_dir": t.run_dir,
                       "stop": m.get("stop_reason") or (None if r.error else "stopped by the scheduler"),
                       "error": None if r.error is None else str(r.error).strip().splitlines()[-1][:200]}
    finally:
        if started:
            shutdown_ray()
    result = [rows[t.index] for t in trials if t.index in rows]
    (out / "results.json").write_text(strict_json.dumps(result, indent=1))
    return result


def _dotted(d: dict[str, Any], key: str) -> Any:
    for part in C.ALIASES.get(key, key).split("."):
        d = d[part]
    return d


def _pbt_interval(cfg: Config) -> float:
    """PBT's perturbation interval: a quarter of the trial's wall-time budget."""
    return (cfg.stop.max_time_s or 60.0) / 4


def _keep(trials: list[Trial], scheduler: str) -> int | None:
    """Tune checkpoints kept per trial: under PBT every report carries one, and a trial copies another's
    up to one perturbation interval after that one was chosen, so keep two intervals' worth."""
    if scheduler != "pbt":
        return None
    cfg = C.from_dict(trials[0].config)
    interval = _pbt_interval(cfg)
    return 2 * math.ceil(interval / cfg.logging.report_interval_s) + 2


def _with_checkpoints(t: Trial) -> Trial:
    cfg = C.from_dict(t.config)
    interval = _pbt_interval(cfg)
    every = max(1, int(interval / 2 / cfg.logging.report_interval_s))
    return Trial(t.index, t.label, t.seed, to_dict(cfg.replace(**{"checkpoint.every_reports": every})), t.run_dir)


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Trials, then the mean over seeds of each setting's best evaluation."""
    def f(v: Any, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    w = max([len("config")] + [len(r["config"]) for r in rows])
    lines = [f"{'config':<{w}}  {'seed':>4}  {'best eval':>9}  {'time s':>7}  {'env steps':>10}  result"]
    for r in rows:
        lines.append(f"{r['config']:<{w}}  {r['seed']:>4}  {f(r['best_eval'], '.1f'):>9}  "
                     f"{f(r['time_s'], '.0f'):>7}  {f(r['env_steps'], ',d'):>10}  {r['error'] or r['stop'] or '-'}")
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r["config"], [])
        if r["best_eval"] is not None:
            by[r["config"]].append(float(r["best_eval"]))
    if any(len([x for x in rows if x["config"] == k]) > 1 for k in by):
        lines.append("")
        lines.append(f"{'config':<{w}}  mean best eval over seeds (min-max)")
        for k, v in by.items():
            lines.append(f"{k:<{w}}  " + (f"{sum(v) / len(v):.1f} ({min(v):.1f}-{max(v):.1f}), {len(v)} seeds"
                                          if v else "-"))
    return "\n".join(lines)


def default_out(config: str | None) -> Path:
    stem = Path(config).stem if config else "cartpole"
    return Path("runs") / f"tune-{stem}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


__all__ = ["SCHEDULERS", "ConfigError", "Trial", "TuneError", "check_scheduler", "concurrency", "make_scheduler",
           "make_trials", "parse_grid", "run", "table", "trial_resources"]
