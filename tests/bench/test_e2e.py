"""bench e2e's interpreter plumbing: the RLlib peer's child may run with a separate venv's python."""

from __future__ import annotations

import os
import sys

from apexrl.bench import e2e


def test_peer_python_defaults_to_this_interpreter_and_keeps_venv_symlinks(tmp_path, monkeypatch):
    assert e2e._peer_python("rllib", None) == sys.executable
    assert e2e._peer_python("sb3", "/somewhere/bin/python") == sys.executable
    link = tmp_path / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    assert e2e._peer_python("rllib", "venv/bin/python") == str(link)  # absolute, symlink not resolved


def test_child_env_for_another_interpreter_activates_its_venv(tmp_path):
    (tmp_path / "pyvenv.cfg").write_text("")
    python = str(tmp_path / "bin" / "python")
    env = e2e._child_env(python)
    assert env["PATH"].split(os.pathsep)[0] == str(tmp_path / "bin")
    assert env["VIRTUAL_ENV"] == str(tmp_path)
    assert str(e2e.ROOT) in env["PYTHONPATH"].split(os.pathsep)


def test_missing_rllib_interpreter_is_a_skip_that_says_how_to_make_the_venv():
    why = e2e._skip_reason("rllib", "/nonexistent/bin/python")
    assert why is not None and "make_rllib_venv.sh" in why and "--rllib-python" in why
    assert e2e._skip_reason("apexrl") is None


def test_rllib_is_skipped_with_the_reason_for_continuous_control_tasks():
    why = e2e._skip_reason("rllib", sys.executable, e2e.TASKS["pendulum"])
    assert why is not None and "DQN only" in why


def test_the_qrdqn_peer_is_skipped_with_the_reason_outside_cartpole():
    why = e2e._skip_reason("qrdqn", sys.executable, e2e.TASKS["minatar"])
    assert why is not None and "CartPole-v1 only" in why


def test_the_qrdqn_peer_reads_rl_zoos_cartpole_file():
    from apexrl.bench.e2e_peers import SB3_ZOO_CARTPOLE, SB3_ZOO_CARTPOLE_QRDQN

    # hyperparams/qrdqn.yml, CartPole-v1: dqn.yml's settings plus n_quantiles 10
    assert SB3_ZOO_CARTPOLE_QRDQN["policy_kwargs"] == {"net_arch": [256, 256], "n_quantiles": 10}
    assert {k: v for k, v in SB3_ZOO_CARTPOLE_QRDQN.items() if k != "policy_kwargs"} == {
        k: v for k, v in SB3_ZOO_CARTPOLE.items() if k != "policy_kwargs"}
