"""How the ``apexrl train`` process starts and ends: the parts of its fixed cost that belong to the command
(its start-up before the run, its exit after), not to the run, which the Python APIs share."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any


def start_ray_while_importing(cfg: Any, dashboard: bool) -> None:
    """The private Ray's servers start while the env id is looked up and the driver's modules (gymnasium,
    the agents' acting side) are imported in a thread (the main thread mostly waits on Ray's processes):
    both before Ray cost ~0.2 s more of every start-up. The driver loads no torch: its evaluations act in
    numpy where the agent allows, its checkpoints are composed by the learner. An env id that names
    nothing is said once ``ray.init`` returns (~1 s), in the same one line; the caller's ``release_early``
    ends that Ray. Looking it up first cost every valid run ~0.15 s of start-up on 2 cores."""
    import importlib
    import threading

    from apexrl.runtime.cluster import start_early
    from apexrl.runtime.sizing import logical_cpus

    failed: list[BaseException] = []

    def imports() -> None:
        try:
            from apexrl.envs.factory import resolve_id

            resolve_id(cfg.env)
            importlib.import_module("apexrl.runtime.driver")
        except BaseException as e:  # noqa: BLE001 - raised in the main thread below
            failed.append(e)

    thread = threading.Thread(target=imports, daemon=True)
    thread.start()
    start_early(logical_cpus(cfg, max(os.cpu_count() or 1, 1)), dashboard)
    thread.join()
    if failed:
        raise failed[0]


def exit_now(code: int) -> None:
    """End the ``apexrl train`` process once the run is on disk and Ray is down: the interpreter's own
    teardown of torch, Ray and gymnasium took ~0.4-0.7 s more and writes nothing (the run's files are
    closed, the final lines flushed)."""
    from apexrl.runtime.driver_process import note_exit

    note_exit()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
