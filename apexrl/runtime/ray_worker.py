"""A private run's Ray worker process: Ray's own worker, which starts importing the roles' modules at once.

Ray starts one worker process per logical CPU when its node starts, long before the run asks for its
actors; an actor then spent ~0.5 s of a 2-core laptop importing gymnasium and the agents after it was
asked for. Here those imports run in a thread from the moment the process exists, while Ray is still
starting, so the first env step comes that much sooner. torch is not among them: an actor whose agent
acts without it (an MLP in numpy) never loads it (~1 s of CPU and ~150 MB less per actor); the learner
and actors of other networks import it when they are built. Roles that need none of this (replay shards, the
parameter server) are started in workers of their own (``LIGHT_ENV``), which skip it.
Ray's serialization context, made once in every process that ships anything, also registers serializers
for pyarrow, pydantic and starlette objects (Ray Data's and Serve's), importing them: ~43 MB and ~0.15 s
of CPU per process, for objects a run never ships. ``lean_serializers`` registers each only in a process
that has already imported its module; the private run's workers and driver use it.
Run by the raylet as ``python ray_worker.py <Ray's worker arguments>``.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import threading
from collections.abc import Callable
from typing import Any

LIGHT_ENV = "APEXRL_LIGHT_WORKER"
# ``@ray.remote(..., **LIGHT)`` on a role that needs neither torch nor gymnasium: Ray gives it a worker of
# its own, started with this variable (a worker's runtime env is part of what it can be reused for).
LIGHT = {"runtime_env": {"env_vars": {LIGHT_ENV: "1"}}}


def _preimport() -> None:
    try:
        import apexrl.runtime.workers  # noqa: F401  (the roles' module: gymnasium, the actor's env loop)
    except Exception:  # noqa: BLE001 - the role's own import will report it
        pass


_ADDON_MODULES = ("pydantic", "starlette", "pyarrow")


def lean_serializers() -> Callable[[], None]:
    """Ray's add-on serializers only for the modules a process has already imported; returns the undo."""
    from ray.util import serialization_addons

    original = getattr(serialization_addons, "apply", None)
    if original is None:  # another Ray's layout: its own registrations, whatever they are
        return lambda: None

    def register(module: str, context: Any) -> None:
        if module == "pydantic":
            try:
                from ray._common.pydantic_compat import register_pydantic_serializers as add
            except ImportError:  # Ray before 2.50
                from ray._private.pydantic_compat import register_pydantic_serializers as add
        elif module == "starlette":
            add = serialization_addons.register_starlette_serializer
        else:
            from ray._private.arrow_serialization import _register_custom_datasets_serializers as add
        add(context)

    def apply(context: Any) -> None:
        used = [m for m in _ADDON_MODULES if m in sys.modules]
        try:
            for module in used:
                register(module, context)
        except (ImportError, AttributeError):  # another Ray's layout: all of its own
            original(context)

    serialization_addons.apply = apply

    def undo() -> None:
        serialization_addons.apply = original

    return undo


def main() -> None:
    spec = importlib.util.find_spec("ray._private.workers.default_worker")
    path = spec.origin if spec is not None else None
    if path is None:
        raise SystemExit("apexrl: Ray's default worker is not installed")
    sys.argv[0], sys.path[0] = path, os.path.dirname(path)  # as if the raylet had run Ray's worker itself
    if os.environ.get(LIGHT_ENV) != "1":
        # numpy and ray, which Ray's worker imports too, first and here: two threads importing one module
        # can each see it half-initialized (numpy's "cannot import name ... partially initialized module",
        # seen once in a test's shard while it deserialized a batch)
        import numpy  # noqa: F401
        import ray  # noqa: F401

        threading.Thread(target=_preimport, name="apexrl-preimport", daemon=True).start()
    lean_serializers()
    runpy.run_path(path, run_name="__main__")


if __name__ == "__main__":
    main()
