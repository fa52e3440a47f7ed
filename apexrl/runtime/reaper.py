"""Nothing outlives a killed driver: a small watchdog process that ends a private Ray's processes when the
process that started them dies, however it dies (SIGKILL and the OOM killer included).

Ray ends its own processes on ``ray.shutdown()``, and most of them when the driver exits; after a SIGKILL
some of its agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) live on. The watchdog is started
before Ray, in a session of its own (a Ctrl-C to the terminal does not reach it), and learns the driver's
process tree every half second. The driver holds the write end of a pipe to it: a clean shutdown writes
``done`` and the watchdog leaves; end-of-file without it means the driver died, and the watchdog kills
every process it saw under the driver (checked by start time, so a reused PID is left alone) and their
children. It runs as a plain script (``python reaper.py PID``) and imports only psutil, not apexrl or torch.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import psutil

POLL_S = 0.5


def _tree(root: psutil.Process) -> dict[int, float]:
    try:
        procs = root.children(recursive=True)
    except psutil.Error:
        return {}
    seen = {}
    for p in procs:
        if p.pid == os.getpid():  # the watchdog is a child of the driver too
            continue
        try:
            seen[p.pid] = p.create_time()
        except psutil.Error:
            pass
    return seen


def _kill(seen: dict[int, float]) -> None:
    victims = []
    for pid, created in seen.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created:
                victims.append(p)
                victims += [c for c in p.children(recursive=True) if c.pid != os.getpid()]
        except psutil.Error:
            pass
    for p in victims:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    psutil.wait_procs(victims, timeout=5)


def main(driver_pid: int) -> int:
    try:
        driver = psutil.Process(driver_pid)
    except psutil.Error:
        return 0
    verdict: list[str] = []
    said = threading.Event()  # a clean shutdown is not kept waiting for the next poll

    def listen() -> None:
        verdict.append(sys.stdin.readline().strip() or "eof")
        said.set()

    threading.Thread(target=listen, daemon=True).start()
    seen: dict[int, float] = {}
    while not verdict:
        if not driver.is_running():
            verdict.append("gone")
            break
        seen.update(_tree(driver))
        said.wait(POLL_S)
    if verdict[0] != "done":
        _kill(seen)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise SystemExit(main(int(sys.argv[1])))
