"""A private run's Ray worker process: Ray's own worker, which starts importing torch at once.

Ray starts one worker process per logical CPU when its node starts, long before the run asks for its
actors; the actor and the learner then spend ~1-1.5 s of a 2-core laptop importing torch and gymnasium
after they are asked for. Here those imports run in a thread from the moment the process exists, while
Ray is still starting, so the first env step comes that much sooner. Roles that need no torch (replay
shards, the parameter server) are started in workers of their own (``LIGHT_ENV``), which skip it.
Run by the raylet as ``python ray_worker.py <Ray's worker arguments>``.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import threading

LIGHT_ENV = "APEXRL_LIGHT_WORKER"
# ``@ray.remote(..., **LIGHT)`` on a role that needs no torch: Ray gives it a worker of its own, started with
# this variable (a worker's runtime env is part of what it can be reused for).
LIGHT = {"runtime_env": {"env_vars": {LIGHT_ENV: "1"}}}


def _preimport() -> None:
    try:
        import torch  # noqa: F401

        import apexrl.runtime.workers  # noqa: F401  (the roles' module: torch, gymnasium, the agents)
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
