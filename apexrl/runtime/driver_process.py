"""`apexrl train --address` in a child process, watched by a thin parent.

Ray ends a driver process outright when the node it is connected to goes (the raylet or its object store:
"connection to the plasma store failed, terminate the process"), with exit status 1 and no word on the
console; no Python code runs after that. The parent stays out of Ray, so it can still say what happened,
where the newest checkpoint is and how to resume. A private loopback Ray dies only with its driver, so runs
without ``--address`` skip the extra process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ENV = "APEXRL_DRIVER_MARKER"  # set in the child: the file where it notes its run dir and a clean exit
EXIT_LOST_CLUSTER = 3


def in_child() -> bool:
    return bool(os.environ.get(ENV))


def note_run_dir(run_dir: Path) -> None:
    if in_child():
        Path(os.environ[ENV]).write_text(f"run_dir={run_dir}\n")


def note_exit() -> None:
    """Python-level exit of the child (done, an error it reported, an interrupt): the parent says nothing."""
    if in_child():
        with open(os.environ[ENV], "a") as f:
            f.write("exit\n")


def run_watched(argv: list[str], address: str) -> int:
    """Run ``apexrl <argv>`` as a child; return its status, or EXIT_LOST_CLUSTER with one line when Ray
    ended it from outside Python."""
    import tempfile

    fd, marker = tempfile.mkstemp(prefix="apexrl-driver-", suffix=".txt")
    os.close(fd)
    # Its own process group: a Ctrl-C at the terminal reaches only this parent, which passes it on once
    # (twice would be "stop at once", skipping the final checkpoint).
    child = subprocess.Popen([sys.executable, "-m", "apexrl", *argv], env={**os.environ, ENV: marker},
                             process_group=0)

    def forward(signum: int, frame: Any) -> None:
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        rc = child.wait()  # SIGINT is forwarded, not raised here: no KeyboardInterrupt to catch
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    text = Path(marker).read_text() if Path(marker).exists() else ""
    Path(marker).unlink(missing_ok=True)
    if rc in (0, 2, 130) or ("exit\n" in text and not _cluster_gone(address)):
        return rc if rc >= 0 else 128 - rc
    run_dir = next((line.split("=", 1)[1] for line in text.splitlines() if line.startswith("run_dir=")), None)
    if rc < 0:
        why = f"the driver process was killed ({signal.Signals(-rc).name})"
    else:
        why = (f"the driver lost the Ray cluster at --address {address} (it no longer answers; the driver "
               f"exited with status {rc})")
    print(f"apexrl: error: {why}{where_to_resume(run_dir)}", file=sys.stderr)
    return 128 - rc if rc < 0 else EXIT_LOST_CLUSTER


def _cluster_gone(address: str) -> bool:
    """The child may also end through Python when the cluster goes (an error from a dead role before Ray
    ends the process): then too the one line to say is that the cluster is gone."""
    from apexrl.runtime.cluster import ClusterError, check_cluster

    try:
        check_cluster(address)
    except ClusterError:
        return True
    return False


def where_to_resume(run_dir: str | None) -> str:
    from apexrl.checkpoint import list_checkpoints

    if run_dir is None:
        return "; no run dir was written yet"
    ckpts = list_checkpoints(Path(run_dir)) if Path(run_dir).is_dir() else []
    if not ckpts:
        return f"; {run_dir} has no checkpoint yet"
    return f"; newest checkpoint {ckpts[-1]}; continue with: apexrl train --resume {run_dir} --address ..."
