"""A multi-agent game trained as a user runs it: self-play on Ray, a checkpoint that resumes, W/D/L per seat in
the metrics, and ``apexrl eval`` playing the checkpoint against random in each seat."""

import json
import subprocess
import sys

import pytest
from fakes import tiny_config

from apexrl.runtime.driver import train

pytestmark = pytest.mark.timeout(300)


def game(**over):
    return tiny_config(**{"env.id": "pettingzoo.classic.tictactoe_v3", "evaluation.interval_s": 1.0,
                          "evaluation.episodes": 20, "checkpoint.every_reports": 2, "checkpoint.replay": True,
                          "logging.report_interval_s": 0.5, "stop.max_env_steps": 8_000, **over})


def test_self_play_trains_on_ray_reports_each_seat_and_resumes(tmp_path):
    run = tmp_path / "run"
    first = train(game(), run_dir=run)
    assert first.env_steps >= 8_000 and first.learner_updates > 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    seats = [r for r in records if "eval_seat_player_1_win" in r]
    assert seats, "evaluations report win / draw / loss per seat"
    for r in seats:
        for seat in ("player_1", "player_2"):
            rates = [r[f"eval_seat_{seat}_{k}"] for k in ("win", "draw", "loss")]
            assert sum(rates) == pytest.approx(1.0)
    second = train(game(**{"stop.max_env_steps": first.env_steps + 4_000}), resume=run)
    assert second.env_steps >= first.env_steps + 4_000
    assert second.learner_updates > first.learner_updates  # the learner's count went on from the checkpoint

    out = subprocess.run([sys.executable, "-m", "apexrl", "eval", str(run), "--episodes", "50"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "50 episodes per seat against a random player" in out.stdout
    assert "W/D/L player_1" in out.stdout and "illegal moves: 0" in out.stdout
    # against a saved snapshot (the run's own best.pt) instead of random
    out = subprocess.run([sys.executable, "-m", "apexrl", "eval", str(run), "--episodes", "20", "--opponent", str(run)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "W/D/L player_1" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "apexrl", "eval", str(run), "--opponent", "no.such.player"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "multiagent.opponent' = 'no.such.player' is invalid" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_trainer_acts_for_one_agent_of_a_game_and_names_its_one_policy():
    from pettingzoo.classic import tictactoe_v3

    from apexrl import ApexTrainer

    trainer = ApexTrainer(config={"env": "pettingzoo.classic.tictactoe_v3", "num_workers": 1,
                                  "multiagent": {"policies": {"shared": None}},
                                  "min_sample_timesteps_per_iteration": 2_000, "replay": {"learning_starts": 200},
                                  "evaluation": {"episodes": 10}})
    try:
        trainer.train()
        env = tictactoe_v3.env()
        env.reset(seed=0)
        obs = env.observe("player_1")
        obs["action_mask"][:] = 0
        obs["action_mask"][4] = 1  # only the centre is legal
        assert trainer.compute_single_action(obs, policy_id="shared") == 4
        assert trainer.compute_single_action(obs) == 4
        with pytest.raises(ValueError, match="one policy, 'shared'"):
            trainer.compute_single_action(obs, policy_id="player_2")
        seats = trainer.evaluate()["evaluation"]["seats"]
        assert set(seats) == {"player_1", "player_2"}
        import numpy as np

        w = {k: v + 1.0 for k, v in trainer.get_weights().items()}
        trainer.set_weights({"shared": w})  # RLlib's form; the one policy's weights as they are work too
        assert all(np.array_equal(trainer.get_weights()[k], w[k]) for k in w)
    finally:
        trainer.stop()


def test_two_policies_one_trained_run_from_the_yaml_file_resume_and_evaluate_per_policy(tmp_path):
    """The shape of RLlib's multi-agent CartPole example: agent 0 by p0 (trained), agent 1 by p1 (acts only)."""
    from pathlib import Path

    import torch

    from apexrl import checkpoint as ckpt
    from apexrl.config import load

    example = Path(__file__).parents[1] / "examples" / "multi_agent" / "two_policies.yaml"
    small = ["actors.num_actors=1", "actors.envs_per_actor=4", "replay.learning_starts=200", "logging.console=off",
             "evaluation.interval_s=2", "evaluation.episodes=4", "logging.report_interval_s=0.5",
             "checkpoint.every_reports=2", "checkpoint.replay=true", "stop.max_time_s=null", "stop.max_env_steps=6000"]
    run = tmp_path / "run"
    first = train(load(example, small), run_dir=run)
    assert first.learner_updates > 0
    state = ckpt.load_latest(run)[1]
    assert set(state["learner"]["policies"]) == {"p0", "p1"}
    assert state["learner"]["policies"]["p1"]["updates"] == 0 and state["learner"]["policies"]["p0"]["updates"] > 0
    p1_before = state["learner"]["policies"]["p1"]["net"]
    assert len(state["replay"]) == 1 and state["replay"][0]["inserted"] > 0  # p0's shard; p1 (not trained) has none
    assert "policy_mapping:\n    '0': p0\n    '1': p1" in (run / "config.yaml").read_text()
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("eval_policy_p0_return" in r and "eval_policy_p1_return" in r for r in records)

    second = train(load(example, [*small[:-1], f"stop.max_env_steps={first.env_steps + 3000}"]), resume=run)
    assert second.learner_updates > first.learner_updates
    state = ckpt.load_latest(run)[1]
    after = state["learner"]["policies"]
    assert all(torch.equal(torch.as_tensor(p1_before[k]), torch.as_tensor(after["p1"]["net"][k])) for k in p1_before)

    out = subprocess.run([sys.executable, "-m", "apexrl", "eval", str(run), "--episodes", "3"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "per policy: p0 " in out.stdout and ", p1 " in out.stdout


def test_two_policies_from_a_config_dict_with_a_mapping_function_and_per_policy_trainer_calls():
    import numpy as np

    from apexrl import ApexTrainer
    from apexrl.envs.multiagent.examples import MultiAgentCartPole

    trainer = ApexTrainer(config={
        "env": MultiAgentCartPole, "env_config": {"num_agents": 2}, "num_workers": 1,
        "multiagent": {"policies": {"p0": (None, None, None, {"lr": 1e-3}), "p1": None},
                       "policy_mapping_fn": lambda agent_id, episode, worker=None, **kw: f"p{agent_id}",
                       "policies_to_train": ["p0"]},
        "min_sample_timesteps_per_iteration": 2_000, "replay": {"learning_starts": 200},
        "evaluation": {"episodes": 3}})
    try:
        trainer.train()
        weights = trainer.get_weights()
        assert set(weights) == {"p0", "p1"} and "/" not in "".join(weights["p0"])
        assert trainer.compute_single_action(np.zeros(4, np.float32), policy_id="p1") in (0, 1)
        with pytest.raises(ValueError, match="name one of this trainer's policies: p0, p1"):
            trainer.compute_single_action(np.zeros(4, np.float32))
        assert set(trainer.evaluate()["evaluation"]["policies"]) == {"p0", "p1"}
        # a frozen policy given weights from outside (RLlib's set_weights): the actors play them, no update moves them
        given = {k: np.zeros_like(v) for k, v in weights["p1"].items()}
        trainer.set_weights({"p1": given})
        trainer.train()
        after = trainer.get_weights()
        assert all(np.array_equal(after["p1"][k], given[k]) for k in given)
        assert any(not np.array_equal(after["p0"][k], weights["p0"][k]) for k in weights["p0"])
        with pytest.raises(ValueError, match="policy 'p9' is not one of p0, p1"):
            trainer.set_weights({"p9": given})
        with pytest.raises(ValueError, match="do not fit the network"):
            trainer.set_weights({"p1": {"nope": np.zeros(2)}})
    finally:
        trainer.stop()


def test_a_killed_learner_of_two_policies_recovers_each_policys_newest_weights_and_goes_on(tmp_path, monkeypatch):
    import numpy as np
    from test_faults import _kill_when_running, _records, _stop_when, _went_on_after, watch_learner_restarts

    from apexrl.runtime.policy_set import split

    seen = watch_learner_restarts(monkeypatch)
    run = tmp_path / "r"
    killed: list[int] = []
    _kill_when_running("LearnerWorker", 0.0, killed, when=lambda: any(r["learner_updates"] > 0
                                                                        for r in _records(run)[4:]))
    _stop_when(_went_on_after(run, "learner_restarts", "learner_updates", 200))
    res = train(tiny_config(**{"env.id": "apexrl.envs.multiagent.examples.MultiAgentCartPole",
                               "multiagent.policies": {"p0": {}, "p1": {}},
                               "multiagent.policy_mapping": {"0": "p0", "1": "p1"},
                               "stop.max_time_s": 300, "checkpoint.every_reports": 4}), run_dir=run)
    assert killed and res.stop_reason == "interrupted"
    assert _records(run)[-1]["learner_restarts"] >= 1 and seen
    got = seen[0]
    published = split(got["published"])
    for pid in ("p0", "p1"):  # each policy starts again from its own newest weights, not a fresh network
        for k, v in published[pid].items():
            np.testing.assert_array_equal(got["recovered"]["policies"][pid]["net"][k].numpy(), v, err_msg=f"{pid} {k}")
    assert got["recovered"]["updates"] >= got["version"] > 0  # publications stay newer than what actors hold


def test_a_killed_actor_of_a_game_is_restarted_and_self_play_goes_on(tmp_path):
    from test_faults import _kill_when_running, _records, _stop_when, _went_on_after

    run = tmp_path / "r"
    killed: list[int] = []
    _kill_when_running("ActorWorker", 0.0, killed, when=lambda: any(r["env_steps"] > 0 for r in _records(run)))
    _stop_when(_went_on_after(run, "actor_restarts", "env_steps", 2_000))
    res = train(game(**{"stop.max_env_steps": None, "stop.max_time_s": 300, "checkpoint.replay": False}), run_dir=run)
    assert killed and res.stop_reason == "interrupted"
    records = _records(run)
    first = next(i for i, r in enumerate(records) if r["actor_restarts"] >= 1)
    assert records[-1]["env_steps"] >= records[first]["env_steps"] + 2_000  # the restarted actor plays on
    assert records[-1]["learner_updates"] > records[first]["learner_updates"]


@pytest.mark.slow
def test_tune_runs_a_two_policy_trial_from_rllibs_config_dict(tmp_path, monkeypatch, ray_local):
    """Slow (~40 s): pytest -m slow tests/test_multiagent_run.py."""
    from ray import tune

    from apexrl import ApexTrainer

    monkeypatch.chdir(tmp_path)
    space = {"env": "apexrl.envs.multiagent.examples.MultiAgentCartPole", "num_workers": 1,
             "multiagent": {"policies": ["p0", "p1"], "policy_mapping_fn": lambda aid, *a, **k: f"p{aid}",
                            "policies_to_train": ["p0"]},
             "lr": tune.grid_search([1e-3]), "replay": {"learning_starts": 200},
             "evaluation": {"interval_s": 1, "episodes": 3}, "logging": {"report_interval_s": 1.0}}
    tuner = tune.Tuner(ApexTrainer, param_space=space,
                       run_config=tune.RunConfig(storage_path=str(tmp_path / "tune"), stop={"training_iteration": 2}))
    results = tuner.fit()
    assert len(results) == 1 and not results.errors
    assert results[0].metrics["timesteps_total"] > 0
