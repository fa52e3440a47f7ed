"""A private run's Ray worker process: Ray's own worker, which starts importing the roles' modules at once.

Ray starts one worker process per logical CPU when its node starts, long before the run asks for its
actors; an actor then spent ~0.5 s of a 2-core laptop importing gymnasium and the agents after it was
asked for. Here those imports run in a thread from the moment the process exists, while Ray is still
starting, so the first env step comes that much sooner. torch is not among them: an actor whose agent
acts without it (an MLP in numpy) never loads it (~1 s of CPU and ~150 MB less per actor); the learner
and actors of other networks import it when they are built. Roles that need none of this (replay shards, the
parameter server) are started in workers of their own (``LIGHT_ENV``), which skip it.
Run by the raylet as ``python ray_worker.py <Ray's worker arguments>``.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import threading

LIGHT_ENV = "APEXRL_LIGHT_WORKER"
# ``@ray.remote(..., **LIGHT)`` on a role that needs neither torch nor gymnasium: Ray gives it a worker of
# its own, started with this variable (a worker's runtime env is part of what it can be reused for).
LIGHT = {"runtime_env": {"env_vars": {LIGHT_ENV: "1"}}}


def _preimport() -> None:
    try:
        import apexrl.runtime.workers  # noqa: F401  (the roles' module: gymnasium, the actor's env loop)
    except Exception:  # noqa: BLE001 - the role's own import will report it
        pass


def main() -> None:
    spec = importlib.util.find_spec("ray._private.workers.default_worker")
    path = spec.origin if spec is not None else None
    if path is None:
        raise SystemExit("apexrl: Ray's default worker is not installed")
    sys.argv[0], sys.path[0] = path, os.path.dirname(path)  # as if the raylet had run Ray's worker itself
    if os.environ.get(LIGHT_ENV) != "1":
        threading.Thread(target=_preimport, name="apexrl-preimport", daemon=True).start()
    runpy.run_path(path, run_name="__main__")


if __name__ == "__main__":
    main()
