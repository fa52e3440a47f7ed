"""Two real `ray start` nodes, each in a network namespace of its own, token authentication on; `apexrl train
--address HEAD:6379` as a user runs it; the worker node is killed mid-run and a new one joins.

Loopback-only Ray refuses a second `ray start` node on one host, so each node gets a private address on a
veth pair that exists only between the two namespaces this test creates and removes: nothing is exposed on
the host's interfaces. Inside them Ray runs as on separate machines (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1,
explicit --node-ip-address). Needs root and iproute2 (`ip netns`); slow (~2 minutes):

    python -m pytest -m slow tests/test_multinode_netns.py -s
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.raystart import RayStartNode

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.timeout(600),
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                 reason="network namespaces need root and iproute2 ('ip')")]

HEAD_NS, WORKER_NS = f"apx-h{os.getpid()}", f"apx-w{os.getpid()}"
HEAD_IP, WORKER_IP = "10.213.0.1", "10.213.0.2"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def namespaces():
    veth = f"vx{os.getpid() % 100000}"
    try:
        _ip("netns", "add", HEAD_NS)
        _ip("netns", "add", WORKER_NS)
        _ip("link", "add", f"{veth}h", "type", "veth", "peer", "name", f"{veth}w")
        _ip("link", "set", f"{veth}h", "netns", HEAD_NS)
        _ip("link", "set", f"{veth}w", "netns", WORKER_NS)
        for ns, dev, addr in ((HEAD_NS, f"{veth}h", HEAD_IP), (WORKER_NS, f"{veth}w", WORKER_IP)):
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
    except subprocess.CalledProcessError as e:
        for ns in (HEAD_NS, WORKER_NS):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        pytest.skip(f"cannot create network namespaces here: {e.stderr.strip()}")
    try:
        yield
    finally:
        for ns in (HEAD_NS, WORKER_NS):  # deleting a namespace removes its end of the veth pair too
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _node_env(token: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, HOME=str(home))
    return env


def _worker(token: str, tmp: Path, n: int) -> RayStartNode:
    return RayStartNode([f"--address={HEAD_IP}:6379", f"--node-ip-address={WORKER_IP}", "--num-cpus=2"],
                        _node_env(token, tmp), tmp / f"worker{n}.log", prefix=["ip", "netns", "exec", WORKER_NS])


def _wait_for(pattern: str, path: Path, timeout: float, proc: Any = None) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        m = re.search(pattern, path.read_text() if path.exists() else "")
        if m:
            return m
        time.sleep(0.5)
    raise AssertionError(f"no '{pattern}' in {path} after {timeout} s:\n{path.read_text()[-3000:]}")


def test_train_on_two_namespaced_nodes_with_tokens_losing_the_worker(namespaces, tmp_path):
    token = secrets.token_hex(32)
    head = RayStartNode(["--head", "--port=6379", f"--node-ip-address={HEAD_IP}", "--num-cpus=1"],
                        _node_env(token, tmp_path), tmp_path / "head.log", prefix=["ip", "netns", "exec", HEAD_NS])
    workers: list[RayStartNode] = []
    driver = None
    try:
        _wait_for(r"Ray runtime started", tmp_path / "head.log", 90, head.proc)
        workers.append(_worker(token, tmp_path, 1))
        _wait_for(r"Ray runtime started", tmp_path / "worker1.log", 90, workers[0].proc)

        home = tmp_path / "user"  # the user's machine: the head's token in the file Ray reads, nothing set
        (home / ".ray").mkdir(parents=True)
        (home / ".ray" / "auth_token").write_text(token)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update(HOME=str(home), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1")
        out = tmp_path / "train.out"
        driver = subprocess.Popen(
            ["ip", "netns", "exec", HEAD_NS, sys.executable, "-m", "apexrl", "train", "--address",
             f"{HEAD_IP}:6379", "--run-dir", str(tmp_path / "run"), "--set", "stop.max_time_s=75",
             "--set", "logging.console=plain", "--set", "logging.report_interval_s=3",
             "--set", "replay.num_shards=2", "--set", "actors.placement=spread"],
            env=env, stdout=out.open("w"), stderr=subprocess.STDOUT)
        _wait_for(r"steps\s+[\d,]+\s+updates\s+[1-9]", out, 120, driver)  # learning, on both nodes
        time.sleep(8)
        workers[0].kill()  # the worker node and every process on it
        _wait_for(r"actor \d failed", out, 60)
        _wait_for(r"waiting \d+ s for Ray to start", out, 60)  # the head's one CPU is the learner's
        steps_while_waiting = _steps(out.read_text())[-1]
        workers.append(_worker(token, tmp_path, 2))  # a new node joins; the waiting actors start there
        assert driver.wait(timeout=300) == 0, out.read_text()[-3000:]
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
        for node in [*workers, head]:
            node.stop()
    text = out.read_text()
    assert "Traceback" not in text
    done = re.search(r"done: reached 75 s; ([\d,]+) env steps", text)
    assert done, text[-3000:]
    assert int(done.group(1).replace(",", "")) > steps_while_waiting + 1000, "actors ran again on the new node"


def _steps(text: str) -> list[int]:
    return [int(s.replace(",", "")) for s in re.findall(r"steps\s+([\d,]+)\s+updates", text)]
