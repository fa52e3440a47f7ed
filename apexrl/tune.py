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
from apexrl.config import Config, ConfigError, to_dict
from apexrl.metrics import Console

DEFAULT_ACTORS = 2  # per trial when the config leaves actors.num_actors to the cluster size


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
    """Hands each driver report to Tune (so its progress and schedulers see the run); prints nothing."""

    KEYS = ("env_steps", "time_s", "learner_updates", "train_return_mean", "env_steps_per_s")

    def __init__(self) -> None:
        super().__init__("off")
        self.best: float | None = None

    def update(self, record: dict[str, Any]) -> None:
        from ray import tune

        rec = {k: record[k] for k in self.KEYS if record.get(k) is not None}
        ev = record.get("eval_return_mean")
        if ev is not None:
            rec["eval_return_mean"] = ev
            self.best = ev if self.best is None else max(self.best, ev)
        if self.best is not None:
            rec["best_eval_return"] = self.best
        tune.report(rec)


def _trainable(params: dict[str, Any], trials: list[Trial]) -> None:
    """One Tune trial: an ordinary ``train()`` that joins Tune's Ray, then a final report."""
    from ray import tune

    from apexrl.config import from_dict
    from apexrl.runtime.driver import train

    t = trials[params["trial"]]
    res = train(from_dict(t.config), run_dir=t.run_dir, console=_TuneConsole())
    tune.report({"env_steps": res.env_steps, "time_s": res.time_s, "learner_updates": res.learner_updates,
                 "eval_return_mean": res.eval_return_mean, "best_eval_return": res.best_eval_return,
                 "stop_reason": res.stop_reason, "run_dir": str(res.run_dir), "final": True})


def run(trials: list[Trial], out: Path, address: str | None = None, max_concurrent: int | None = None,
        verbose: int = 0) -> list[dict[str, Any]]:
    """Run every trial on Ray Tune; return one row per trial (in trial order)."""
    try:
        from ray import tune
    except ImportError as e:
        raise TuneError(f"Ray Tune is not installed ({e}); pip install 'ray[tune]'") from None
    import ray

    from apexrl.runtime.cluster import init_ray

    os.environ.setdefault("RAY_CHDIR_TO_TRIAL_DIR", "0")  # trials write to absolute run dirs anyway
    cfgs = [C.from_dict(t.config) for t in trials]
    bundles = [trial_resources(c)[0] for c in cfgs]  # per trial: the grid may change actors or learner
    biggest = max(cfgs, key=lambda c: trial_resources(c)[1])
    started = init_ray(address, num_cpus=max(os.cpu_count() or 1, math.ceil(trial_resources(biggest)[1])))
    try:
        n = max_concurrent or concurrency(biggest, ray.cluster_resources())
        trainable = tune.with_resources(tune.with_parameters(_trainable, trials=trials),
                                        lambda p: tune.PlacementGroupFactory(bundles[p["trial"]]))
        tuner = tune.Tuner(
            trainable,
            param_space={"trial": tune.grid_search([t.index for t in trials])},
            tune_config=tune.TuneConfig(max_concurrent_trials=n,
                                        trial_dirname_creator=lambda tr: f"trial{tr.config['trial']}"),
            run_config=tune.RunConfig(name="_tune", storage_path=str(out.resolve()), verbose=verbose,
                                      failure_config=tune.FailureConfig(max_failures=0)),
        )
        grid = tuner.fit()
        rows: dict[int, dict[str, Any]] = {}
        for r in grid:
            i = r.config["trial"]
            m = dict(r.metrics or {})
            t = trials[i]
            rows[i] = {"config": t.label, "seed": t.seed, "best_eval": m.get("best_eval_return"),
                       "last_eval": m.get("eval_return_mean"), "time_s": m.get("time_s"),
                       "env_steps": m.get("env_steps"), "stop": m.get("stop_reason"), "run_dir": t.run_dir,
                       "error": None if r.error is None else str(r.error).strip().splitlines()[-1][:200]}
    finally:
        if started:
            ray.shutdown()
    result = [rows[t.index] for t in trials if t.index in rows]
    (out / "results.json").write_text(json.dumps(result, indent=1, default=str))
    return result


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


__all__ = ["ConfigError", "Trial", "TuneError", "concurrency", "make_trials", "parse_grid", "run", "table",
           "trial_resources"]
