"""bench limits' in-process measurements on tiny budgets: each returns a positive rate of the right thing."""

from __future__ import annotations

from apexrl.bench import limits


def test_alone_figures_measure_env_actor_and_learner_for_both_agents():
    for env_id, overrides in (("CartPole-v1", ["network.torso=[16]"]),
                              ("MinAtar/Breakout-v1", ["learner.batch_size=8"])):
        cfg = limits.preset_for(env_id, overrides)
        assert limits.env_ceiling(cfg, 0.05, 1) > 0
        assert limits.actor_alone(cfg, 0.05, 1) > 0
        assert limits.learner_alone(cfg, 0.05, 1) > 0
    dpg = limits.preset_for("CartPole-v1", []).replace(**{"agent": "dpg", "env.id": "Pendulum-v1"})
    assert limits.learner_alone(dpg, 0.05, 1) > 0
