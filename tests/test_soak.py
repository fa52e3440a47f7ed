"""The soak benchmark, short: `apexrl train` with actors, shards and the learner SIGKILLed at random
(slow; the 30-minute figure in docs/benchmarks.md comes from `apexrl bench soak --minutes 30`).

    python -m pytest -m slow tests/test_soak.py -s
"""

import json

import pytest

from apexrl.bench import soak

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def test_a_run_under_random_kills_keeps_what_it_promised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert soak.main(["--minutes", "4", "--kill-every", "30", "--roles", "learner,shard,actor", "--out", str(tmp_path / "soak.json")]) == 0
    r = json.loads((tmp_path / "soak.json").read_text())
    assert r["exit_code"] == 0 and not r["traceback_in_output"]
    assert len(r["kills"]) >= 4
    for role, n in r["kills_by_role"].items():
        assert r["restarts"][role] >= n  # every kill was noticed and repaired
    assert all("restart_reported_after_s" in k for k in r["kills"])
    learner = [k for k in r["kills"] if k["role"] == "learner"]
    assert all(k.get("work_resumed_after_s", 999) < 60 for k in learner)  # updates continue within a minute
    assert r["checkpoints"] >= 2 and r["checkpoints_failing_to_load"] == []
    assert r["resume_exit_code"] == 0 and r["resumed_at_env_steps"] == r["final_checkpoint_env_steps"]
    assert r["resume_end_env_steps"] > r["resumed_at_env_steps"]
    assert r["best_eval"] is not None and r["best_eval"] > 100  # still learning
    assert r["eval_20_episodes_mean"] is not None
