"""What a run reports is what it leaves: the weights of its best greedy evaluation are kept as
``checkpoints/best.pt``, a run that stops on its target ends with exactly the weights that met it, and
``apexrl eval RUN`` plays those (``--newest`` the newest checkpoint)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fakes import tiny_config

from apexrl import checkpoint as ckpt
from apexrl.cli import main
from apexrl.config import from_dict
from apexrl.core import load_numpy_state_dict
from apexrl.evaluation import evaluate
from apexrl.runtime.assembly import assemble
from apexrl.runtime.driver import train


def replay_evaluation(state, episodes=None, seed=None):
    """Play the recorded evaluation again: same weights, same seeds, same episodes, in its parts (an evaluation
    and its confirmation), or ``episodes`` fresh ones."""
    cfg = from_dict(state["config"])
    system = assemble(cfg, num_actors=1)
    net = system.make_network()
    load_numpy_state_dict(net, state["learner"]["net"])
    parts = state["evaluation"]["parts"] if episodes is None else [(seed, episodes)]
    return [r for seed, n in parts for r in evaluate(system.make_eval_policy(net, n, seed), cfg.env, n, seed=seed)]


@pytest.mark.parametrize("agent", ["dqn", "dpg"])
def test_a_run_stopped_by_its_target_leaves_the_weights_that_met_it(agent, tmp_path, capsys):
    over = ({"stop.target_return": 60.0} if agent == "dqn" else
            {"agent": "dpg", "env.id": "Pendulum-v1", "stop.target_return": -1000.0,
             "replay.learning_starts": 500, "replay.samples_per_insert": 8.0,  # actors wait for the learner
             "network.torso": [64, 64], "network.head": 64})  # the tiny net took ~110 s to -1000, this ~10 s
    cfg = tiny_config(**{"evaluation.interval_s": 1.0, "evaluation.episodes": 4, "stop.max_time_s": 240,
                         "checkpoint.every_reports": 2, **over})
    result = train(cfg, run_dir=tmp_path / "run")
    assert result.reached_target, result.stop_reason
    assert result.best_checkpoint == tmp_path / "run" / "checkpoints" / "best.pt"

    state = ckpt.load_file(result.best_checkpoint)
    e = state["evaluation"]
    assert e["mean"] == pytest.approx(result.best_eval_return) and e["mean"] >= cfg.stop.target_return
    # It stopped on an evaluation of 4 episodes that met the target and 8 more of the same weights (the
    # confirmation, twice evaluation.episodes) that kept all 12 above it.
    assert len(e["returns"]) == e["episodes"] == 12 and [n for _, n in e["parts"]] == [4, 8]
    # The kept weights are the ones that played that evaluation: replaying it gives the same returns.
    np.testing.assert_allclose(replay_evaluation(state), e["returns"], rtol=1e-6)
    # On 20 fresh episodes they play as well, within the noise of two means (4 standard errors: the best of
    # several evaluations is biased up by its selection).
    fresh = replay_evaluation(state, episodes=20, seed=987_654)
    se = np.sqrt(np.var(e["returns"], ddof=1) / 12 + np.var(fresh, ddof=1) / 20)
    assert np.mean(fresh) >= e["mean"] - 4 * se - 1e-6, (fresh, e["returns"])
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert max(r["eval_return_mean"] for r in records if r.get("eval_return_mean") is not None) == \
        pytest.approx(e["mean"])
    # Resume reads the newest full checkpoint, never best.pt.
    newest, _ = ckpt.load_latest(tmp_path / "run")
    assert newest.name.startswith("ckpt-")

    capsys.readouterr()
    assert main(["eval", str(tmp_path / "run"), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "best.pt" in out and "the weights of the run's best evaluation" in out
    assert main(["eval", str(tmp_path / "run"), "--episodes", "2", "--newest"]) == 0
    assert newest.name in capsys.readouterr().out


def test_evaluations_in_a_worker_of_their_own_stop_the_run_and_keep_best_pt_as_the_driver_thread_does(
        tmp_path, topologies):
    """On a cluster (``evaluation.where: auto`` with --address) the driver's process stays the control plane."""
    from apexrl.runtime.evaluator import WorkerEvaluator

    cfg = tiny_config(**{"evaluation.interval_s": 1.0, "evaluation.episodes": 4, "evaluation.where": "worker",
                         "stop.max_time_s": 240, "stop.target_return": 60.0})
    result = train(cfg, run_dir=tmp_path / "run")
    assert isinstance(topologies[0].evaluator, WorkerEvaluator)
    assert result.reached_target, result.stop_reason
    state = ckpt.load_file(result.best_checkpoint)
    assert state["evaluation"]["mean"] == pytest.approx(result.best_eval_return)
    assert state["evaluation"]["mean"] >= 60.0
    np.testing.assert_allclose(replay_evaluation(state), state["evaluation"]["returns"], rtol=1e-6)


def test_best_pt_holds_the_evaluation_and_the_weights_it_played(tmp_path):
    from apexrl.runtime.checkpointing import Checkpointer
    from apexrl.runtime.progress import Progress

    cfg = tiny_config()
    progress = Progress(num_actors=1)
    keeper = Checkpointer(cfg, topology=None, run_dir=tmp_path, progress=progress)  # type: ignore[arg-type]
    w = {"x": np.zeros(2, np.float32)}
    best = keeper.best_state({"eval_returns": [1.0, 3.0], "seed": 5, "weights_version": 7, "weights": w}, elapsed=1.0)
    ckpt.save_best(tmp_path, ckpt.to_bytes(best))  # what best() writes, from the learner's process
    state = ckpt.load_file(ckpt.best_path(tmp_path))
    assert state["evaluation"] == {"mean": 2.0, "returns": [1.0, 3.0], "episodes": 2, "seed": 5, "parts": [[5, 2]],
                                   "weights_version": 7, "env_steps": 0, "time_s": 1.0}
    np.testing.assert_array_equal(state["learner"]["net"]["x"], w["x"])
