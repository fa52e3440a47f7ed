"""A private run is reachable only by its owner: started as a user starts it (no ``RAY_*`` variables in the
environment), every socket of its process tree listens on loopback, and Ray refuses a client that lacks
the run's own token."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from apexrl.bench.overhead import user_env
from apexrl.runtime import lean_start, ray_compat

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def listening(root: psutil.Process) -> list[tuple[str, str, int]]:
    rows = []
    for p in [root, *root.children(recursive=True)]:
        try:
            rows += [(p.name(), c.laddr.ip, c.laddr.port) for c in p.net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return rows


def wait_for_workers(proc: subprocess.Popen, names: tuple[str, ...], timeout: float = 120.0) -> psutil.Process:
    """Until the run's Ray actors exist and listen (the last sockets a run opens)."""
    root = psutil.Process(proc.pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else "exited"
        procs = [p for p in root.children(recursive=True) if p.is_running()]
        found = {n for n in names for p in procs if _name(p).startswith(n)}
        if found == set(names) and all(any(_name(p).startswith(n) and _listens(p) for p in procs) for n in names):
            return root
        time.sleep(0.5)
    raise AssertionError(f"the run's workers {names} did not start in {timeout:.0f} s")


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.NoSuchProcess:
        return ""


def _listens(p: psutil.Process) -> bool:
    try:
        return any(c.status == psutil.CONN_LISTEN for c in p.net_connections(kind="inet"))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def gcs_address(root: psutil.Process) -> str:
    for p in root.children(recursive=True):
        if _name(p) == "gcs_server":
            ports = {c.laddr.port for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
            assert len(ports) == 1, ports
            return f"127.0.0.1:{ports.pop()}"
    raise AssertionError("no gcs_server in the run's process tree")


def run_token_path(root: psutil.Process) -> str:
    """The token file the run handed its Ray processes (same user: /proc/PID/environ is readable)."""
    for p in root.children(recursive=True):
        if _name(p) == "raylet":
            return p.environ()["RAY_AUTH_TOKEN_PATH"]
    raise AssertionError("no raylet in the run's process tree")


JOIN = ("import ray\ntry:\n    ray.init(address={addr!r}, logging_level='ERROR'); print('JOINED')\n"
        "except Exception as e:\n    print('REFUSED', type(e).__name__)\n")


def try_join(addr: str, **env: str) -> subprocess.CompletedProcess:
    full = {**user_env(), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", **env}  # ask on loopback, where it listens
    return subprocess.run([sys.executable, "-c", JOIN.format(addr=addr)], env=full, capture_output=True,
                          text=True, timeout=120)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.compat
def test_apexrl_train_listens_on_loopback_only_and_refuses_clients_without_its_token(tmp_path):
    """On a Ray without token authentication (< 2.52), loopback only, and the start-up says so."""
    proc = subprocess.Popen([sys.executable, "-m", "apexrl", "train", "--max-time", "300", "--console", "off",
                             "--run-dir", str(tmp_path / "run")], env=user_env(), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    token_path = None
    try:
        root = wait_for_workers(proc, ("ray::ActorWorker", "ray::LearnerWorker", "gcs_server", "raylet"))
        rows = listening(root)
        assert len(rows) >= 6, rows
        exposed = [r for r in rows if r[1] not in LOOPBACK]
        assert not exposed, f"listening beyond loopback: {exposed}"
        if ray_compat.token_auth():
            addr, token_path = gcs_address(root), run_token_path(root)
            assert os.stat(token_path).st_mode & 0o777 == 0o600
            assert os.stat(Path(token_path).parent).st_mode & 0o777 == 0o700
            # Another local user brings their own token (or Ray's default ~/.ray/auth_token), or none at all.
            stranger = try_join(addr, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0" * 64)
            assert "REFUSED ConnectionError" in stranger.stdout, stranger.stdout + stranger.stderr
            assert "InvalidAuthToken" in stranger.stderr
            owner = try_join(addr, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=token_path)
            assert "JOINED" in owner.stdout, owner.stdout + owner.stderr  # the refusal was about the token
    finally:
        stop(proc)
    out = proc.stdout.read()
    assert proc.returncode == 0, out[-3000:]
    if token_path is not None:
        assert not Path(token_path).exists(), "the run's token outlived the run"
    else:
        assert "has no token authentication" in out and "loopback only" in out, out[-3000:]


TRAINER = """
import sys, time
from apexrl import ApexTrainer
t = ApexTrainer(config={"env": "CartPole-v1", "num_workers": 1, "run_dir": sys.argv[1]})
t.train()
print("TRAINED", flush=True)
sys.stdin.readline()
t.stop()
"""


def test_trainer_api_listens_on_loopback_only(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", TRAINER, str(tmp_path / "run")], env=user_env(), cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == "TRAINED"
        rows = listening(psutil.Process(proc.pid))
        assert any(name.startswith("ray::LearnerWorker") for name, _, _ in rows), rows
        exposed = [r for r in rows if r[1] not in LOOPBACK]
        assert not exposed, f"listening beyond loopback: {exposed}"
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.compat
def test_a_private_ray_leaves_the_process_environment_as_it_was(monkeypatch):
    """A later ``--address`` run in the same process must not inherit the private run's loopback or token."""
    import ray._private.ray_constants as ray_constants

    from apexrl.runtime.cluster import init_ray, shutdown_ray

    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN", "users-own-token")
    before = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH",
                                             "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    init_ray(None, num_cpus=1)
    try:
        if ray_compat.token_auth():
            assert os.environ["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN" not in os.environ
        assert ray_constants.ENABLE_RAY_CLUSTER is False
    finally:
        shutdown_ray()
    assert {k: os.environ.get(k) for k in before} == before


@pytest.mark.compat
def test_nothing_outlives_a_sigkilled_apexrl_train(tmp_path):
    """The OOM killer's way: SIGKILL, no chance to shut Ray down. Every process the run started ends."""
    proc = subprocess.Popen([sys.executable, "-m", "apexrl", "train", "--max-time", "300", "--console", "off",
                             "--run-dir", str(tmp_path / "run")], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        root = wait_for_workers(proc, ("ray::ActorWorker", "ray::LearnerWorker", "raylet"))
        tree = {(p.pid, p.create_time()) for p in root.children(recursive=True)}
        commands = [psutil.Process(pid).cmdline() for pid, _ in tree]
        assert any(a.endswith("reaper.py") for c in commands for a in c)
        # The raylet's agents (Ray's own outlived a SIGKILLed driver; the stand-ins where they fit) are in it.
        stand_ins = sum(a.endswith("ray_agents.py") for c in commands for a in c)
        assert stand_ins == (2 if lean_start.stand_ins_fit() else 0), commands
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 30
    while True:
        alive = [psutil.Process(pid) for pid, created in tree if _alive(pid, created)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not alive, f"alive 30 s after the driver's SIGKILL: {[_name(p) for p in alive]}"


def _alive(pid: int, created: float) -> bool:
    try:
        p = psutil.Process(pid)
        return p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
