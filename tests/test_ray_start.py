"""`apexrl train --address` against a real `ray start --head`, as current Ray starts it: token
authentication on (where that Ray has it: 2.52+), one CPU. Nothing set by the user but the token file Ray
itself writes."""

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from apexrl.runtime import ray_compat
from tests.raystart import free_port, start_head

pytestmark = pytest.mark.timeout(300)
needs_tokens = pytest.mark.skipif(not ray_compat.token_auth(), reason="this Ray has no token authentication (< 2.52)")


@pytest.fixture(scope="module")
def token_head(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("head")
    token, port = (secrets.token_hex(32) if ray_compat.token_auth() else ""), free_port()
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    if token:
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    head = start_head(tmp, port, num_cpus=1, env=env)
    try:
        yield f"127.0.0.1:{port}", token, tmp
    finally:
        head.stop()
        time.sleep(1.0)
        left = [p for p in psutil.process_iter(["cmdline"])
                if any(f"{port}" in a for a in (p.info["cmdline"] or []))]
        assert not left, f"processes of the test cluster left behind: {left}"


def _home_with_token(tmp, token):
    home = tmp / ("home-" + (token[:6] if token else "none"))
    (home / ".ray").mkdir(parents=True, exist_ok=True)
    if token:
        (home / ".ray" / "auth_token").write_text(token)
    return home


def _user_env(home):
    """A user's shell: no Ray auth or address settings, HOME (and its ~/.ray/auth_token) as given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH") and k != "RAY_ADDRESS"}
    env.update(HOME=str(home), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    return env


def _train(address, home, run_dir, seconds=6, *extra):
    env = _user_env(home)
    return subprocess.run([sys.executable, "-m", "apexrl", "train", "--address", address, "--run-dir", str(run_dir),
                           "--set", f"stop.max_time_s={seconds}", "--set", "logging.console=plain",
                           "--set", "evaluation.interval_s=0", *extra],
                          env=env, capture_output=True, text=True, timeout=240)


def _last_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith("apexrl")]
    return lines[-1] if lines else err[-500:]


@pytest.mark.compat
def test_host_port_trains_on_a_token_cluster_with_the_token_file_ray_writes(token_head):
    address, token, tmp = token_head
    out = _train(address, _home_with_token(tmp, token), tmp / "run-hostport", 200, "--set", "stop.max_env_steps=3000")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "done: reached 3,000 env steps" in out.stdout  # actors and learner were scheduled on the one CPU


def test_auto_trains_on_the_same_cluster(token_head):
    address, token, tmp = token_head
    current = Path("/tmp/ray/ray_current_cluster")
    if not current.exists() or current.read_text().strip() != address:
        pytest.skip("another Ray cluster started on this host since the test head: 'auto' would find that one")
    out = _train("auto", _home_with_token(tmp, token), tmp / "run-auto", seconds=3)
    assert out.returncode == 0, out.stderr[-3000:]


@needs_tokens
def test_no_token_here_is_one_line_naming_authentication(token_head):
    address, _, tmp = token_head
    out = _train(address, _home_with_token(tmp, ""), tmp / "run-none")
    assert out.returncode == 2
    assert _last_line(out.stderr) == (
        f"apexrl: error: the Ray cluster at --address {address} requires token authentication and no token is "
        "set here: copy the head's token (`ray get-auth-token` on the head) into RAY_AUTH_TOKEN or "
        "~/.ray/auth_token")
    assert not (tmp / "run-none").exists()


@needs_tokens
def test_a_wrong_token_is_refused_as_authentication_not_as_unreachable(token_head):
    address, _, tmp = token_head
    out = _train(address, _home_with_token(tmp, secrets.token_hex(32)), tmp / "run-wrong")
    assert out.returncode == 2
    assert "refused this machine's token (authentication failed)" in _last_line(out.stderr)
    assert "Traceback" not in out.stderr


@pytest.mark.compat
def test_nothing_listening_is_unreachable_not_authentication(tmp_path):
    out = _train(f"127.0.0.1:{free_port()}", _home_with_token(tmp_path, ""), tmp_path / "run")
    assert out.returncode == 2 and "cannot reach a Ray cluster at --address 127.0.0.1:" in _last_line(out.stderr)


def _popen_train(address, home, run_dir, *extra):
    env = _user_env(home)
    return subprocess.Popen([sys.executable, "-m", "apexrl", "train", "--address", address, "--run-dir", str(run_dir),
                             "--set", "logging.console=plain", "--set", "logging.report_interval_s=1",
                             "--set", "checkpoint.every_reports=2", *extra],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_checkpoint(run_dir, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if list((run_dir / "checkpoints").glob("ckpt-*.pt")):
            return
        time.sleep(0.3)
    raise AssertionError(f"no checkpoint in {run_dir}: {proc.poll()}")


def test_sigterm_to_a_cluster_run_checkpoints_and_exits_0(token_head):
    address, token, tmp = token_head
    run = tmp / "run-sigterm"
    p = _popen_train(address, _home_with_token(tmp, token), run)
    try:
        _wait_for_checkpoint(run, p)
        p.send_signal(signal.SIGTERM)  # to the apexrl process the user started, as a scheduler would
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-2000:]
    assert "stopping: interrupted" in err and "Traceback" not in err


def test_losing_the_cluster_ends_with_one_line_naming_the_checkpoint(tmp_path):
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    port = free_port()
    head = start_head(tmp_path, port, num_cpus=2, env=env)
    try:
        run = tmp_path / "run"
        p = _popen_train(f"127.0.0.1:{port}", Path.home(), run)
        _wait_for_checkpoint(run, p)
        head.kill()  # every process of the cluster, the raylet this driver is connected to included
        out, err = p.communicate(timeout=120)
    finally:
        head.stop()
    assert p.returncode == 3, err[-3000:]
    last = [x for x in err.splitlines() if x.strip()][-1]
    assert last.startswith(f"apexrl: error: the driver lost the Ray cluster at --address 127.0.0.1:{port}")
    assert f"newest checkpoint {run}/checkpoints/ckpt-" in last and f"apexrl train --resume {run}" in last
    from apexrl import checkpoint as ckpt

    ckpt.load_latest(run)  # intact
