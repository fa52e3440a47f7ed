"""``apexrl plot`` on synthetic metrics.jsonl files, ``apexrl tune`` planning, and one tiny Tune run."""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from apexrl import config as C
from apexrl import plot, tune
from apexrl.cli import main


def fake_run(root: Path, name: str, lr: float, seed: int, slope: float, n: int = 20, evals: bool = True) -> Path:
    """A run dir like the driver writes: config.yaml and one report line per 1,000 env steps."""
    run = root / name
    run.mkdir(parents=True)
    cfg = C.load("cartpole", [f"learner.lr={lr}", f"seed={seed}", f"name={name}"])
    (run / "config.yaml").write_text(C.dump_yaml(cfg))
    lines = []
    for i in range(1, n + 1):
        rec = {"time_s": 2.0 * i, "env_steps": 1000 * i, "learner_updates": 100 * i,
               "train_return_mean": slope * i, "env_steps_per_s": 500.0}
        if evals and i % 5 == 0:
            rec["eval_return_mean"] = slope * i + 1
        lines.append(json.dumps(rec))
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n{\"time_s\": 4")  # torn last line: skipped
    return run


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    out = [fake_run(root, f"lr1e-3__s{s}", 1e-3, s, slope=1.0 + s) for s in range(3)]
    out += [fake_run(root, f"lr3e-4__s{s}", 3e-4, s, slope=0.5) for s in range(2)]
    return root, out


def test_groups_by_setting_without_seed(runs):
    _, dirs = runs
    groups = plot.group_curves([plot.load_curve(d, "train") for d in dirs])
    assert [(label, len(m)) for label, m in groups] == [("learner.lr=0.001 (3 seeds)", 3),
                                                        ("learner.lr=0.0003 (2 seeds)", 2)]


def test_each_run_can_be_its_own_curve(runs, tmp_path):
    _, dirs = runs
    groups = plot.group_curves([plot.load_curve(d, "train") for d in dirs], each=True)
    assert [len(m) for _, m in groups] == [1] * 5
    assert groups[0][0] == "learner.lr=0.001 (seed 0)" and groups[4][0] == "learner.lr=0.0003 (seed 1)"
    if importlib.util.find_spec("matplotlib"):
        assert main(["plot", *map(str, dirs), "--each", "-o", str(tmp_path / "each.png")]) == 0
        assert (tmp_path / "each.png").stat().st_size > 0


def test_band_is_mean_and_min_max_over_seeds(runs):
    _, dirs = runs
    members = [plot.load_curve(d, "train") for d in dirs[:3]]  # returns i, 2i, 3i at env steps 1000 i
    x, mean, lo, hi = plot.band(members, "env_steps", points=20)
    assert x[0] == 1000 and x[-1] == 20_000
    i = x / 1000
    np.testing.assert_allclose(mean, 2 * i)
    np.testing.assert_allclose(lo, i)
    np.testing.assert_allclose(hi, 3 * i)


def test_band_median_is_the_middle_seed_where_the_mean_follows_an_outlier(tmp_path):
    members = [plot.load_curve(fake_run(tmp_path, f"s{k}", 1e-3, k, slope), "train")
               for k, slope in enumerate([1.0, 2.0, 6.0])]
    x, med, lo, hi = plot.band(members, "env_steps", points=5, stat="median")
    _, mean, _, _ = plot.band(members, "env_steps", points=5)
    i = x / 1000
    np.testing.assert_allclose(med, 2 * i)
    np.testing.assert_allclose(mean, 3 * i)
    np.testing.assert_allclose(lo, i)
    np.testing.assert_allclose(hi, 6 * i)


def test_band_ends_with_the_shortest_run(tmp_path):
    a = plot.load_curve(fake_run(tmp_path, "a", 1e-3, 0, 1.0, n=20), "train")
    b = plot.load_curve(fake_run(tmp_path, "b", 1e-3, 1, 1.0, n=10), "train")
    x, *_ = plot.band([a, b], "time_s")
    assert x[-1] == 20.0  # b's last report at 2 s x 10


def test_plot_writes_png_via_cli(runs, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    root, _ = runs
    out = tmp_path / "png" / "curves.png"
    assert main(["plot", str(root), "-o", str(out)]) == 0  # a directory of run dirs
    img = __import__("matplotlib.image", fromlist=["imread"]).imread(out)
    assert img.shape[0] > 200 and img.shape[1] > 600
    text = capsys.readouterr().out
    assert "learner.lr=0.001 (3 seeds): best eval" in text and "wrote" in text


def test_plot_single_run_and_train_metric(tmp_path):
    pytest.importorskip("matplotlib")
    run = fake_run(tmp_path, "only", 1e-3, 0, 1.0, evals=False)
    assert plot.plot_runs([run], tmp_path / "x.png").stat().st_size > 1000  # auto: no eval -> train
    with pytest.raises(plot.PlotError, match="no eval returns"):
        plot.plot_runs([run], tmp_path / "y.png", metric="eval")


def test_plot_rejects_non_runs(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["plot", str(tmp_path / "empty")]) == 2
    assert "no metrics.jsonl" in capsys.readouterr().err


# -- tune: planning (no Ray) -------------------------------------------------------------------------

def test_parse_grid_and_trials(tmp_path):
    grid = tune.parse_grid(["learner.lr=1e-4, 3e-4", "learner.n_step=1,3"])
    assert grid == {"learner.lr": [1e-4, 3e-4], "learner.n_step": [1, 3]}
    trials = tune.make_trials(None, ["actors.num_actors=1"], grid, 2, 500, None, tmp_path)
    assert len(trials) == 8 and len({t.run_dir for t in trials}) == 8
    t = trials[-1]
    cfg = C.from_dict(t.config)
    assert (cfg.learner.lr, cfg.learner.n_step, cfg.seed, cfg.stop.max_env_steps) == (3e-4, 3, 1, 500)
    assert t.label == "learner.lr=0.0003,learner.n_step=3" and t.run_dir.endswith(f"{t.label}__s1")


@pytest.mark.parametrize("grid, match", [(["learner.lr"], "key=v1,v2"), (["learner.lr=1", "learner.lr=2"], "twice")])
def test_bad_grid(grid, match):
    with pytest.raises(tune.TuneError, match=match):
        tune.parse_grid(grid)


def test_bad_trial_configs_fail_before_ray(tmp_path, capsys):
    with pytest.raises(C.ConfigError, match="learner.lr"):
        tune.make_trials(None, [], {"learner.lr": [-1.0]}, 1, 100, None, tmp_path)
    with pytest.raises(tune.TuneError, match="budget"):
        tune.make_trials(None, [], {}, 1, None, None, tmp_path)
    assert main(["tune", "--grid", "learner.lrr=1e-3", "--max-env-steps", "10", "--out", str(tmp_path)]) == 2
    assert "did you mean 'learner.lr'" in capsys.readouterr().err
    (tmp_path / "old").mkdir()
    assert main(["tune", "--max-env-steps", "10", "--out", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err


def test_trial_resources_and_concurrency():
    cfg = C.load("cartpole", ["actors.num_actors=3", "learner.num_cpus=2"])
    bundles, cpus = tune.trial_resources(cfg)
    assert bundles == [{"CPU": 1.0}, {"CPU": 2.0}] and cpus == 6.0
    assert tune.concurrency(cfg, {"CPU": 13.0}) == 2
    assert tune.concurrency(cfg, {"CPU": 2.0}) == 1  # never 0: Tune runs them in turn
    gpu = cfg.replace(**{"learner.num_gpus": 1.0})
    assert tune.trial_resources(gpu)[0][1] == {"CPU": 2.0, "GPU": 1.0}
    assert tune.concurrency(gpu, {"CPU": 64.0, "GPU": 2.0}) == 2


def test_table_groups_seeds():
    rows = [{"config": "lr=1", "seed": s, "best_eval": b, "time_s": 3.0, "env_steps": 1000, "stop": "done",
             "error": None} for s, b in ((0, 10.0), (1, 20.0))]
    text = tune.table(rows)
    assert "15.0 (10.0-20.0), 2 seeds" in text and "1,000" in text


# -- tune: one tiny real run -------------------------------------------------------------------------

@pytest.mark.slow
def test_tune_runs_trials_end_to_end(tmp_path, capsys):
    """Two settings x one seed on a private Ray: nested Ray (train() inside a trial) and the table."""
    pytest.importorskip("ray.tune")
    pytest.importorskip("matplotlib")
    out = tmp_path / "tune"
    rc = main(["tune", "--grid", "learner.lr=1e-3,3e-4", "--seeds", "1", "--max-env-steps", "1500",
               "--out", str(out), "--set", "actors.num_actors=1", "--set", "replay.learning_starts=200",
               "--set", "evaluation.interval_s=1", "--set", "evaluation.episodes=2",
               "--set", "logging.report_interval_s=1", "--set", "logging.tensorboard=false",
               "--set", "network.torso=[32]", "--set", "network.head=32"])
    text = capsys.readouterr().out
    assert rc == 0, text
    rows = json.loads((out / "results.json").read_text())
    assert [(r["config"], r["seed"], r["error"]) for r in rows] == [("learner.lr=0.001", 0, None),
                                                                   ("learner.lr=0.0003", 0, None)]
    for r in rows:
        assert r["env_steps"] >= 1500 and r["time_s"] > 0
        assert yaml.safe_load((Path(r["run_dir"]) / "config.yaml").read_text())["stop"]["max_env_steps"] == 1500
    assert "learner.lr=0.001" in text and "best eval" in text
    assert main(["plot", str(out), "-o", str(tmp_path / "t.png")]) == 0


# -- console: live line on a terminal, plain periodic lines elsewhere ----------------------------------

REC = {"time_s": 1234.0, "env_steps": 12_345_678, "learner_updates": 1_234_567, "train_return_mean": 475.3,
       "eval_return_mean_last": 500.0, "env_steps_per_s": 12345.0, "updates_per_s": 123.0, "replay_size": 100_000}


def test_console_live_line_fits_the_terminal(monkeypatch):
    import io

    from apexrl.metrics import Console

    monkeypatch.setenv("COLUMNS", "60")
    out = io.StringIO()
    con = Console("live", out)
    con.update(REC)
    con.update(REC)
    con.message("done")
    parts = out.getvalue().split("\r\x1b[2K")
    assert parts[0] == "" and len(parts) == 3
    assert len(parts[1]) == 59 and parts[2] == parts[1] + "\ndone\n"  # rewritten in place, no wrap


def test_console_plain_when_not_a_tty(monkeypatch):
    import io

    from apexrl import metrics

    out = io.StringIO()
    con = metrics.Console("auto", out)  # StringIO is not a TTY
    assert con.mode == "plain"
    clock = iter([100.0, 100.0, 105.0, 111.0, 111.0])
    monkeypatch.setattr(metrics, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    for _ in range(3):
        con.update(REC)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in out.getvalue() and "12,345,678" in lines[0]  # at most one per 10 s


def test_schedulers_are_checked_before_ray(tmp_path, capsys):
    grid = {"learner.lr": [1e-3, 3e-4]}
    trials = tune.make_trials(None, [], grid, 1, 1000, None, tmp_path)
    with pytest.raises(tune.TuneError, match="--max-time"):
        tune.check_scheduler("asha", trials, grid)
    timed = tune.make_trials(None, [], grid, 1, None, 30, tmp_path)
    tune.check_scheduler("asha", timed, grid)
    with pytest.raises(tune.TuneError, match="perturbs the --grid keys"):
        tune.check_scheduler("pbt", tune.make_trials(None, [], {}, 2, None, 30, tmp_path), {})
    with pytest.raises(tune.TuneError, match="at least 2 trials"):
        tune.check_scheduler("pbt", tune.make_trials(None, [], {"learner.lr": [1e-3]}, 1, None, 30, tmp_path),
                             {"learner.lr": [1e-3]})
    assert main(["tune", "--scheduler", "pbt", "--grid", "learner.lr=1e-3,2e-3", "--max-env-steps", "10",
                 "--out", str(tmp_path / "o")]) == 2
    assert "--max-time" in capsys.readouterr().err


TINY_TRIAL = ["--set", "actors.num_actors=1", "--set", "replay.learning_starts=200", "--set", "evaluation.interval_s=1",
              "--set", "evaluation.episodes=2", "--set", "logging.report_interval_s=1",
              "--set", "logging.tensorboard=false", "--set", "network.torso=[64]", "--set", "network.head=32"]


@pytest.mark.slow
def test_asha_stops_a_hopeless_trial_early(tmp_path, capsys):
    """Trials in turn: the learning one (lr 2e-3) runs its 40 s; the one that cannot learn (lr 1e-7) is
    compared at the same times and stopped at a rung."""
    pytest.importorskip("ray.tune")
    out = tmp_path / "asha"
    rc = main(["tune", "--scheduler", "asha", "--grid", "learner.lr=2e-3,1e-7", "--max-time", "40",
               "--concurrent", "1", "--out", str(out), *TINY_TRIAL])
    assert rc == 0, capsys.readouterr().out
    rows = {r["config"]: r for r in json.loads((out / "results.json").read_text())}
    strong, weak = rows["learner.lr=0.002"], rows["learner.lr=1e-07"]
    assert strong["time_s"] >= 39 and weak["stop"] == "stopped by the scheduler" and weak["time_s"] < 30


@pytest.mark.slow
def test_pbt_moves_a_weak_trial_onto_a_strong_ones_checkpoint_and_settings(tmp_path, capsys):
    pytest.importorskip("ray.tune")
    out = tmp_path / "pbt"
    rc = main(["tune", "--scheduler", "pbt", "--grid", "learner.lr=2e-3,1e-7", "--max-time", "48",
               "--concurrent", "2", "--out", str(out), "--set", "learner.num_cpus=0.5",
               "--set", "actors.num_cpus=0.5", *TINY_TRIAL])
    assert rc == 0, capsys.readouterr().out
    rows = {r["config"]: r for r in json.loads((out / "results.json").read_text())}
    weak = rows["learner.lr=1e-07"]
    assert weak["error"] is None
    # PBT's log of each exploit: [target, source, ..., source's config, the target's new config]
    moves = [json.loads(line) for line in (out / "_tune" / "pbt_global.txt").read_text().splitlines()]
    onto_strong = [m for m in moves if m[0].startswith("1_") and m[1].startswith("0_")]
    assert onto_strong, f"PBT never moved the weak trial: {moves}"
    # The new lr is the strong one's perturbed over the grid: 2e-3 or, one step along it, 1e-7 again;
    # whichever PBT chose is what the weak trial's run then trained with.
    final_lr = yaml.safe_load((Path(weak["run_dir"]) / "config.yaml").read_text())["learner"]["lr"]
    assert final_lr == pytest.approx(onto_strong[-1][-1]["grid:learner.lr"])
    # ...on the strong trial's weights: at lr 1e-7 from scratch a greedy CartPole policy stays near 10.
    assert weak["best_eval"] > 50
    assert weak["time_s"] > 48, "resumed from a checkpoint that had already run part of the budget"
