"""``apexrl train | eval | bench | runs | tune | plot``: the user-facing commands.

Bad input ends with one line on stderr naming the problem and the fix, exit status 2, no traceback
(``--debug`` shows it) and no run dir. ``train`` exits 0 when done (a SIGTERM or Ctrl-C too, after a final
checkpoint), 1 when training had to stop, 3 when its ``--address`` cluster went away (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from apexrl.config import ConfigError

EXIT_USAGE = 2


class UserError(Exception):
    """Anything the user can fix; printed as one line."""


def _user_errors() -> tuple[type[BaseException], ...]:
    from apexrl.checkpoint import CheckpointError
    from apexrl.envs import EnvSpecError
    from apexrl.runtime.cluster import ClusterError

    return (ConfigError, EnvSpecError, CheckpointError, ClusterError, UserError)


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train Ape-X (default: CartPole-v1 on a local Ray)")
    p.add_argument("--config", "-c", default=None,
                   help="YAML config file, preset name (cartpole, atari) or RLlib experiment file; default: cartpole")
    p.add_argument("--experiment", default=None, metavar="NAME",
                   help="with an RLlib experiment file: run only this experiment (default: each in turn)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set learner.lr=3e-4 (repeatable)")
    p.add_argument("--max-env-steps", type=int, default=None, help="stop after this many env steps")
    p.add_argument("--max-time", type=float, default=None, metavar="SECONDS", help="stop after this many seconds")
    p.add_argument("--target-return", type=float, default=None, metavar="R",
                   help="stop when the evaluation mean return reaches R")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--name", default=None, help="run name (default {env}__s{seed}__{time})")
    p.add_argument("--run-dir", default=None, help="write the run here instead of runs/<name>")
    p.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue a run from its newest checkpoint")
    p.add_argument("--address", default=None,
                   help="join an existing Ray cluster ('auto' or HOST:PORT); default: a private local Ray")
    p.add_argument("--dashboard", action="store_true", help="start the Ray dashboard (local Ray, loopback only)")
    p.add_argument("--console", choices=["auto", "live", "plain", "off"], default=None)


def _add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="play greedy episodes with a checkpoint and print the mean return")
    p.add_argument("checkpoint", help="checkpoint file (.pt) or run dir (its best evaluation's weights, "
                   "checkpoints/best.pt, where it has one; else its newest checkpoint)")
    p.add_argument("--newest", action="store_true", help="with a run dir: its newest checkpoint, not best.pt")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--epsilon", type=float, default=0.0)
    p.add_argument("--video", default=None, metavar="PATH",
                   help="also record one episode to PATH (.mp4 needs imageio[ffmpeg]; .gif uses Pillow)")
    p.add_argument("--opponent", default=None, metavar="WHO",
                   help="a game's other seats: random, self, a checkpoint or run dir, or module.fn (default: the run's)")


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks: replay | actors | shards | feed | scaling | scale | e2e | games | "
                                     "sweep | update | limits | soak | overhead; results in ./bench-results/")
    p.add_argument("which", help="benchmark name")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the benchmark")


def _add_runs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="list runs with their steps, best evaluation and newest checkpoint")
    p.add_argument("root", nargs="?", default="runs")


def _add_tune(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="grid of config values x seeds on Ray Tune; one table of results")
    p.add_argument("config", nargs="?", default=None, help="YAML config file or preset name; default: cartpole")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="values to try for a config key, e.g. --grid learner.lr=1e-4,3e-4 (repeatable: product)")
    p.add_argument("--seeds", type=int, default=1, help="seeds per grid point: seed, seed+1, ... (default 1)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key in every trial (repeatable)")
    p.add_argument("--max-env-steps", type=int, default=None, help="stop each trial after this many env steps")
    p.add_argument("--max-time", type=float, default=None, metavar="SECONDS", help="stop each trial after this")
    p.add_argument("--scheduler", default="fifo", choices=("fifo", "asha", "pbt"),
                   help="fifo: every trial runs its budget; asha: stop weak trials early; pbt: weak trials "
                        "continue from strong ones' checkpoints with the --grid keys perturbed (asha and pbt "
                        "compare trials at equal wall time: give --max-time)")
    p.add_argument("--concurrent", type=int, default=None, metavar="N",
                   help="trials at once (default: as many as the cluster's CPUs fit)")
    p.add_argument("--out", default=None, help="directory for the trials' run dirs (default runs/tune-<time>)")
    p.add_argument("--address", default=None, help="join a Ray cluster ('auto' or HOST:PORT)")


def _add_plot(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="PNG learning curves of runs (seeds of one config: mean and min-max band)")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="run dirs, or a directory of run dirs (e.g. the --out of apexrl tune)")
    p.add_argument("-o", "--output", default="curves.png", help="PNG file to write (default curves.png)")
    p.add_argument("--metric", choices=["auto", "eval", "train"], default="auto",
                   help="which return to draw (auto: eval where the runs have it, else train)")
    p.add_argument("--each", action="store_true", help="one curve per run instead of mean and band per config")
    p.add_argument("--stat", choices=["mean", "median"], default="mean",
                   help="the line drawn for a config's seeds (the band is always min-max)")
    p.add_argument("--title", default=None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="apexrl", description="Ape-X distributed DQN on PyTorch + Ray")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_train(sub)
    _add_eval(sub)
    _add_bench(sub)
    _add_runs(sub)
    _add_tune(sub)
    _add_plot(sub)
    return parser


def _train_configs(args: argparse.Namespace) -> list[tuple[str | None, Any]]:
    from apexrl import config as C

    overrides = list(args.overrides)
    if args.seed is not None:
        overrides.append(f"seed={args.seed}")
    if args.name is not None:
        overrides.append(f"name={args.name}")
    if args.console is not None:
        overrides.append(f"logging.console={args.console}")
    for flag, key in ((args.max_env_steps, "stop.max_env_steps"), (args.max_time, "stop.max_time_s"),
                      (args.target_return, "stop.target_return")):
        if flag is not None:
            overrides.append(f"{key}={flag}")
    if args.resume is not None:
        run = Path(args.resume)
        if not (run / "config.yaml").is_file():
            raise UserError(f"--resume {run}: not a run dir (no config.yaml); give a directory under runs/")
        if args.config is not None:
            raise UserError("--resume takes the run's own config.yaml; use --set to change keys, not --config")
        return [(None, C.load(run / "config.yaml", overrides))]
    return C.load_all(args.config if args.config is not None else "cartpole", overrides, args.experiment)


def cmd_train(args: argparse.Namespace) -> int:
    from apexrl.runtime.footprint import Startup

    startup = Startup()
    runs = _train_configs(args)
    if len(runs) > 1 and args.address is None:  # an RLlib file's experiments, in turn, as RLlib ran them
        codes = []
        for name, _ in runs:
            print(f"experiment {name}:")
            sub = argparse.Namespace(**{**vars(args), "experiment": name, "argv": [*args.argv, "--experiment", name],
                                        "run_dir": None if args.run_dir is None else str(Path(args.run_dir) / name)})
            codes.append(cmd_train(sub))
        return max(codes)
    if len(runs) > 1:
        raise UserError("with --address, give one experiment of the file: --experiment NAME")
    cfg = runs[0][1]
    if args.run_dir is not None and args.resume is not None:
        raise UserError("use either --run-dir or --resume, not both")
    if args.run_dir is not None and Path(args.run_dir).exists() and any(Path(args.run_dir).iterdir()):
        raise UserError(f"--run-dir {args.run_dir} exists and is not empty; use --resume {args.run_dir} "
                        "to continue it or choose another directory")
    from apexrl.runtime import cluster, driver_process

    if args.address is not None and not driver_process.in_child():
        cluster.check_cluster(args.address)  # a wrong address or token: one line here, before a child exists
        return driver_process.run_watched(args.argv, args.address)
    from apexrl.runtime.results import default_run_dir

    # Named here, before Ray starts, so that a watching parent can point at its checkpoints.
    run_dir = args.run_dir if args.run_dir is not None or args.resume is not None else default_run_dir(cfg)
    driver_process.note_run_dir(Path(args.resume or run_dir))
    try:
        if args.address is None:
            from apexrl.runtime.launch import start_ray_while_importing

            startup.mark("Python and config")
            start_ray_while_importing(cfg, args.dashboard)
            startup.mark("Ray and imports (in parallel)")
        return _train(args, cfg, run_dir, startup)
    finally:
        cluster.release_early()


def _train(args: argparse.Namespace, cfg: Any, run_dir: Any, startup: Any) -> int:
    from apexrl.runtime.driver import TrainingError, train

    try:
        result = train(cfg, run_dir=run_dir, address=args.address, resume=args.resume,
                       dashboard=args.dashboard, startup=startup)
    except TrainingError as e:
        print(f"apexrl: training stopped: {e}", file=sys.stderr)
        return 1
    ev = "-" if result.eval_return_mean is None else f"{result.eval_return_mean:.4g}"
    best = "-" if result.best_eval_return is None else f"{result.best_eval_return:.4g}"
    print(f"done: {result.stop_reason}; {result.env_steps:,} env steps, {result.learner_updates:,} updates, "
          f"{result.time_s:.0f} s; last eval {ev}, best {best}; " + _footprint(result) + f"run dir {result.run_dir}")
    if result.best_checkpoint is not None:
        print(f"best evaluation's weights: {result.best_checkpoint} (what `apexrl eval {result.run_dir}` plays)")
    return 0


def _footprint(result: Any) -> str:
    parts = ([f"start-up {result.startup_s:.1f} s"] if result.startup_s is not None else []) + \
        ([f"peak memory {result.peak_memory_mb:,.0f} MB"] if result.peak_memory_mb is not None else [])
    return "; ".join(parts) + "; " if parts else ""


def cmd_eval(args: argparse.Namespace) -> int:
    import numpy as np

    from apexrl import checkpoint as ckpt
    from apexrl.config import from_dict
    from apexrl.envs import is_atari
    from apexrl.envs.scores import human_normalized_score
    from apexrl.evaluation import evaluate_system, seat_rates
    from apexrl.metrics import seats_text
    from apexrl.runtime.assembly import assemble

    if args.episodes < 1:
        raise UserError(f"--episodes {args.episodes}: must be >= 1")
    if args.video is not None and Path(args.video).suffix.lower() not in (".mp4", ".gif"):
        raise UserError(f"--video {args.video}: use a .mp4 or .gif path")
    path, state = ckpt.resolve(Path(args.checkpoint), best=not args.newest)
    cfg = from_dict(state["config"])
    if args.opponent is not None:
        cfg = cfg.replace(**{"multiagent.opponent": args.opponent})
    system = assemble(cfg, num_actors=1)
    try:
        net, weights = system.loaded_network(state["learner"]["net"])
    except RuntimeError as e:
        raise UserError(f"checkpoint '{path}' does not match the network of its config: {str(e).splitlines()[0]}") from None
    res = evaluate_system(system, net, weights, args.episodes, args.seed, args.epsilon)
    returns = res["eval_returns"]
    hns = human_normalized_score(cfg.env.id, float(np.mean(returns))) if is_atari(cfg.env) else None
    games = " per seat against a random player" if "eval_seats" in res else ""
    print(f"{cfg.env.id}: {args.episodes} episodes{games}, return mean {np.mean(returns):.2f} "
          f"std {np.std(returns):.2f} (min {np.min(returns):.1f}, max {np.max(returns):.1f})"
          + ("" if hns is None else f", human-normalized {100 * hns:.1f}%") + f" from {path}")
    if "eval_policies" in res:
        print("  per policy: " + ", ".join(f"{p} {r:.2f}" for p, r in res["eval_policies"].items()))
    if "eval_seats" in res:
        print(f" {seats_text(seat_rates(res)).strip()}; illegal moves: {res['eval_illegal']}")
    if "evaluation" in state:
        e = state["evaluation"]
        print(f"  (the weights of the run's best evaluation: mean {e['mean']:.2f} over {e['episodes']} episodes at "
              f"{e['env_steps']:,} env steps; --newest plays the newest checkpoint)")
    if args.video is not None:
        from apexrl.video import VideoError, record_episode

        try:
            ret, steps = record_episode(system.make_eval_policy(net, 1, args.seed, args.epsilon), cfg.env,
                                        args.video, seed=args.seed)
        except VideoError as e:
            raise UserError(str(e)) from None
        print(f"video: {args.video} ({steps} steps, return {ret:.1f})")
    return 0


BENCHMARKS = ("replay", "actors", "shards", "feed", "scaling", "scale", "e2e", "sweep", "update", "limits", "soak",
              "overhead", "games", "defaults")


def cmd_bench(args: argparse.Namespace) -> int:
    import importlib

    if args.which not in BENCHMARKS:
        raise UserError(f"unknown benchmark '{args.which}'; available: {', '.join(BENCHMARKS)}")
    mod = importlib.import_module(f"apexrl.bench.{args.which}")
    return int(mod.main(list(args.args)) or 0)


def cmd_runs(args: argparse.Namespace) -> int:
    from apexrl.checkpoint import list_checkpoints

    root = Path(args.root)
    if not root.is_dir():
        raise UserError(f"no runs directory '{root}'")
    rows = []
    for run in sorted(p for p in root.iterdir() if (p / "config.yaml").exists()):
        steps, best, last_t = 0, None, None
        mpath = run / "metrics.jsonl"
        if mpath.exists():
            for line in mpath.read_text().splitlines():
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                steps, last_t = r.get("env_steps", steps), r.get("time_s", last_t)
                if r.get("eval_return_mean") is not None:
                    best = r["eval_return_mean"] if best is None else max(best, r["eval_return_mean"])
        ckpts = list_checkpoints(run)
        rows.append((run.name, steps, best, last_t, ckpts[-1].name if ckpts else "-"))
    print(f"{'run':<48} {'env steps':>10} {'best eval':>9} {'time s':>7}  checkpoint")
    for name, steps, best, t, c in rows:
        print(f"{name:<48} {steps:>10,} {('-' if best is None else f'{best:.1f}'):>9} "
              f"{('-' if t is None else f'{t:.0f}'):>7}  {c}")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from apexrl import tune

    try:
        out = Path(args.out) if args.out is not None else tune.default_out(args.config)
        grid = tune.parse_grid(args.grid)
        trials = tune.make_trials(args.config, args.overrides, grid, args.seeds, args.max_env_steps, args.max_time, out)
        tune.check_scheduler(args.scheduler, trials, grid)
        if args.concurrent is not None and args.concurrent < 1:
            raise UserError(f"--concurrent {args.concurrent}: must be >= 1")
        if out.exists() and any(out.iterdir()):
            raise UserError(f"--out {out} exists and is not empty; choose another directory")
        out.mkdir(parents=True, exist_ok=True)
        print(f"tune: {len(trials)} trials -> {out}", file=sys.stderr)
        rows = tune.run(trials, out, address=args.address, max_concurrent=args.concurrent,
                        scheduler=args.scheduler, grid=grid)
    except tune.TuneError as e:
        raise UserError(str(e)) from None
    print(tune.table(rows))
    print(f"run dirs and results.json in {out}; curves: apexrl plot {out}")
    return 1 if any(r["error"] for r in rows) else 0


def cmd_plot(args: argparse.Namespace) -> int:
    from apexrl import plot

    try:
        runs = plot.expand_runs(args.runs)
        path = plot.plot_runs(runs, args.output, metric=args.metric, title=args.title, each=args.each,
                               stat=args.stat)
        lines = plot.summary(runs)
    except plot.PlotError as e:
        raise UserError(str(e)) from None
    print("\n".join(lines))
    print(f"wrote {path} ({len(runs)} runs)")
    return 0


COMMANDS = {"train": cmd_train, "eval": cmd_eval, "bench": cmd_bench, "runs": cmd_runs, "tune": cmd_tune,
            "plot": cmd_plot}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.debug:
        os.environ["APEXRL_LOG_LEVEL"] = "DEBUG"
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        code = COMMANDS[args.command](args)
        if argv is None and args.command == "train":
            from apexrl.runtime.launch import exit_now

            exit_now(code)
        return code
    except _user_errors() as e:
        if args.debug:
            raise
        print(f"apexrl: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("apexrl: interrupted", file=sys.stderr)
        return 130
    finally:
        from apexrl.runtime.driver_process import note_exit

        note_exit()


if __name__ == "__main__":
    sys.exit(main())
