"""Real ``ray start`` nodes for tests, as users start them: ``ray start --block`` in its own process group,
ended by that group only (never ``ray stop``, which would end every Ray on the host)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayStartNode:
    """One ``ray start`` node; ``prefix`` runs it elsewhere (e.g. ``ip netns exec NS``)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, prefix: list[str] | None = None) -> None:
        ray_bin = str(Path(sys.executable).with_name("ray"))
        self.log = log
        head = ["--include-dashboard=false"] if "--head" in args else []
        self.proc = subprocess.Popen([*(prefix or []), ray_bin, "start", "--block", "--disable-usage-stats",
                                      *head, *args], env=env, stdout=log.open("w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def wait_for_port(self, host: str, port: int, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray start exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection((host, port), timeout=1.0):
                    return
            except OSError:
                time.sleep(0.3)
        raise TimeoutError(f"ray start did not listen on {host}:{port}: {self.log.read_text()[-2000:]}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Ends the node's whole process group (GCS, raylet, its workers)."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
        time.sleep(1.0)
        self.kill(signal.SIGKILL)  # whatever ignored SIGTERM


def start_head(tmp: Path, port: int, num_cpus: int, env: dict[str, str]) -> RayStartNode:
    head = RayStartNode(["--head", f"--port={port}", f"--num-cpus={num_cpus}", "--node-ip-address=127.0.0.1",
                         f"--ray-client-server-port={free_port()}"], env, tmp / "head.log")
    head.wait_for_port("127.0.0.1", port)
    return head
