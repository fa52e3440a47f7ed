"""Distributional and noisy heads through the whole system: actors acting on per-atom outputs (numpy and
torch), the learner's distributional loss, checkpoints, resume, `apexrl eval`, ApexTrainer and the in-process
ApeX."""

import json

import numpy as np
import pytest
import ray
import torch
from fakes import tiny_config

from apexrl import checkpoint as ckpt
from apexrl.cli import main
from apexrl.runtime.driver import train

pytestmark = pytest.mark.timeout(300)


def tiny(**over):
    return tiny_config(**{"evaluation.interval_s": 0.5, "evaluation.episodes": 2, "checkpoint.every_reports": 2,
                          "checkpoint.replay": True, "stop.max_env_steps": 6_000, **over})


@pytest.mark.parametrize("head", [
    {"network.distribution": "quantile", "network.num_atoms": 8, "network.noisy": True},
    {"network.distribution": "categorical", "network.num_atoms": 11, "network.v_min": 0, "network.v_max": 50,
     "env.id": "apexrl.envs.stateless:CartPoleNoVel-v1", "network.kind": "mlp", "actors.precision": "bfloat16"},
], ids=["quantile-noisy-numpy-actors", "categorical-torch-actors"])
def test_a_distributional_run_trains_checkpoints_resumes_and_evaluates(tmp_path, capsys, head):
    run = tmp_path / "run"
    first = train(tiny(**head), run_dir=run)
    assert not ray.is_initialized()
    assert first.env_steps >= 6_000 and first.learner_updates > 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("eval_return_mean" in r for r in records)
    losses = [r["loss"] for r in records if r.get("loss") is not None]
    assert losses and all(np.isfinite(losses))
    _, state = ckpt.load_latest(run)
    keys = set(state["learner"]["net"])
    atoms = head["network.num_atoms"]
    out = "head.advantage.2.weight_mu" if head.get("network.noisy") else "head.advantage.2.weight"
    assert out in keys and state["learner"]["net"][out].shape[0] == 2 * atoms, "two actions x atoms outputs"
    before = {k: v.clone() for k, v in state["learner"]["net"].items()}

    second = train(tiny(**{**head, "stop.max_env_steps": 9_000}), resume=run)
    assert second.env_steps >= 9_000 and second.learner_updates >= first.learner_updates
    _, state2 = ckpt.load_latest(run)
    assert any(not torch.equal(before[k], v) for k, v in state2["learner"]["net"].items())

    assert main(["eval", str(run), "--episodes", "3", "--newest"]) == 0
    said = capsys.readouterr().out
    assert "3 episodes, return mean" in said


def test_apex_trainer_acts_greedily_without_noise():
    from apexrl import ApexTrainer
    from apexrl.config import to_dict

    trainer = ApexTrainer(to_dict(tiny_config(**{"network.noisy": True, "network.distribution": "categorical",
                                                 "network.num_atoms": 11, "network.v_min": 0,
                                                 "network.v_max": 50, "stop.max_env_steps": 2_000})))
    try:
        trainer.train()
        obs = np.array([0.01, 0.2, -0.03, -0.3], np.float32)
        greedy = {trainer.compute_single_action(obs) for _ in range(10)}
        assert len(greedy) == 1, "greedy play uses the noisy layers' means"
        assert trainer.compute_single_action(obs, explore=True) in (0, 1)
    finally:
        trainer.stop()
    assert not ray.is_initialized()


def test_the_in_process_apex_trains_apexrls_quantile_network():
    import apexrl

    env = apexrl.create_env("CartPole-v1")
    model = apexrl.q_network(env, distribution="quantile", num_atoms=8, torso=(32,), head=16)
    apex = apexrl.ApeX(env, model, torch.optim.Adam(model.parameters(), lr=1e-3), learning_starts=64,
                       batch_size=16, n_step=3)
    assert apex.cfg.network.distribution == "quantile" and apex.cfg.network.num_atoms == 8
    state, _ = env.reset(seed=0)
    stats = []
    for _ in range(300):
        action = apex.select_action(state)
        nxt, r, term, trunc, _ = env.step(action)
        apex.store_experience(state, action, r, nxt, term, trunc)
        stats.append(apex.learn())
        state = nxt if not (term or trunc) else env.reset()[0]
    done = [s for s in stats if s is not None]
    assert done and all(np.isfinite(s["loss"]) for s in done)
    assert apex.learner.__class__.__name__ == "DistributionalDQNLearner"
