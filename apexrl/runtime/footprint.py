"""What a run costs besides training: when its parts were ready (start-up) and the memory of its processes.

Memory is PSS (proportional set size): a page shared by k processes counts 1/k in each, so the sum over a
process tree is what the tree takes from the machine; RSS would count torch's shared library once per
process. A private run's tree is the driver and everything under it (Ray's servers and workers, the
watchdog); on a cluster only the driver's own process is on this machine.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import psutil

SAMPLE_S = 5.0  # a sample reads every process's smaps_rollup: ~3-4 ms per torch process of kernel time

# Ray names a worker process after its actor class (``ray::ActorWorker.run``); its servers by executable or script.
_ROLES = (
    ("ray::ActorWorker", "actor"), ("ray::LearnerWorker", "learner"), ("ray::ReplayShardWorker", "replay shard"),
    ("ray::ParameterServer", "parameter server"), ("ray::DashboardAgent", "Ray dashboard agent"),
    ("ray::RuntimeEnvAgent", "Ray runtime-env agent"), ("ray::IDLE", "Ray idle worker"),
    ("gcs_server", "Ray GCS"), ("raylet", "Ray raylet"), ("dashboard/dashboard.py", "Ray dashboard head"),
    ("autoscaler/_private/monitor.py", "Ray autoscaler monitor"), ("log_monitor.py", "Ray log monitor"),
    ("apexrl/runtime/reaper.py", "apexrl watchdog"), ("ray::", "other Ray worker"),
)


def role_of(cmdline: list[str], root: bool = False) -> str:
    """The role a process plays, from its command line (``root``: the process that started the run)."""
    if root:
        return "driver"
    for i, arg in enumerate(cmdline[:-1]):  # by argument: the raylet's own arguments name these scripts too
        if arg.endswith("ray_agents.py"):
            return f"Ray {cmdline[i + 1]} agent, stand-in"
    text = " ".join(cmdline)
    for marker, role in _ROLES:
        if marker in text:
            return role
    return "other"


def process_start(pid: int | None = None) -> float:
    """When a process started (wall clock): the moment its command was run. From the kernel's start time in
    clock ticks since boot (10 ms); psutil's ``create_time`` adds the boot time, which Linux gives in whole
    seconds, and was up to a second off."""
    try:
        with open(f"/proc/{pid or 'self'}/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime; the name may hold spaces
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux
        return psutil.Process(pid).create_time()


def command_start(slack_s: float = 1.0) -> float:
    """When this command began (wall clock). Usually its process's start; but a shell runs its last command
    by exec in its own process (``bash -c 'pip install … && apexrl train'``), whose start is the shell's,
    minutes before. Python is CPU-bound until here, so it began no earlier than its CPU time ago (the
    shell's own CPU before the exec is milliseconds); ``slack_s`` for what it waited on the disk or for a
    core. The slack errs long: an exec'd command's start-up reads up to that much more, never less."""
    t = os.times()
    return max(process_start(), time.time() - (t.user + t.system) - slack_s)


def tree_pss(root_pid: int) -> list[tuple[str, int]]:
    """(role, PSS bytes) of ``root_pid`` and every process under it; processes that end meanwhile are skipped."""
    try:
        root = psutil.Process(root_pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
    out = []
    for p in procs:
        try:
            out.append((role_of(p.cmdline(), root=p.pid == root_pid), p.memory_full_info().pss))
        except psutil.Error:
            continue
    return out


def by_role(procs: list[tuple[str, int]]) -> dict[str, tuple[int, int]]:
    """role -> (processes, PSS bytes), largest first."""
    roles: dict[str, tuple[int, int]] = {}
    for role, pss in procs:
        n, total = roles.get(role, (0, 0))
        roles[role] = (n + 1, total + pss)
    return dict(sorted(roles.items(), key=lambda kv: -kv[1][1]))


@dataclass
class PeakMemory:
    """Samples a process tree's PSS every ``interval_s`` in a thread (and when asked: :meth:`sample`); keeps
    the peak and its breakdown. Memory of a run grows with its replay, so its peak is near the end, where
    the driver samples once more."""

    root_pid: int = field(default_factory=os.getpid)
    interval_s: float = SAMPLE_S
    peak: int = 0
    at_peak: list[tuple[str, int]] = field(default_factory=list)
    last: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> int:
        procs = tree_pss(self.root_pid)
        self.last = sum(b for _, b in procs)
        if self.last > self.peak:
            self.peak, self.at_peak = self.last, procs
        return self.last

    def start(self) -> PeakMemory:
        self._thread = threading.Thread(target=self._run, name="apexrl-memory", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20

    @property
    def last_mb(self) -> float:
        return self.last / 2**20


@dataclass
class Startup:
    """Wall-clock marks of a run's start (``time.time()``), from the moment its command began."""

    process: float = field(default_factory=command_start)
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, name: str, at: float | None = None) -> None:
        self.marks.setdefault(name, time.time() if at is None else at)

    def since_start(self, name: str) -> float | None:
        return self.marks[name] - self.process if name in self.marks else None

    def parts(self) -> list[tuple[str, float]]:
        """Consecutive durations between the marks, in the order they happened."""
        out, prev = [], self.process
        for name, t in sorted(self.marks.items(), key=lambda kv: kv[1]):
            out.append((name, max(0.0, t - prev)))
            prev = t
        return out
