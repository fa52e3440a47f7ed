"""Which Ray apexrl runs on, and which of that Ray's private names it may lean on.

The declared range (pyproject's ``ray`` requirement) is the tested range: CI runs the compatibility suite
(tests marked ``compat``) on its two ends. A Ray outside it is refused in one line unless the user asks to
try it (``APEXRL_UNTESTED_RAY=1``); such a Ray then gets Ray's stock start-up, since the lean one
(``lean_start.py``) reaches into internals that change between releases without notice.

The floor is 2.54: on 2.40 and 2.53, private runs and one-node clusters worked, but on a two-node cluster
the GCS declared the driver dead about a second after it created its roles (tests/test_multinode_netns.py).
Token authentication came in Ray 2.52: an older Ray, run with ``APEXRL_UNTESTED_RAY=1``, runs a private run
on loopback alone and says so at start-up.
"""

from __future__ import annotations

import os
import warnings
from functools import lru_cache

import ray

OLDEST = (2, 54)  # keep in step with pyproject.toml's ray requirement and .ci/run
NEWEST = (2, 60)
UNTESTED = "APEXRL_UNTESTED_RAY"
RANGE = f">={OLDEST[0]}.{OLDEST[1]},<{NEWEST[0]}.{NEWEST[1] + 1}"


def version(text: str | None = None) -> tuple[int, int]:
    """Major and minor of ``text`` (default: the installed Ray); (0, 0) when unreadable (a dev build)."""
    parts = (text or ray.__version__).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return 0, 0


def tested(text: str | None = None) -> bool:
    return OLDEST <= version(text) <= NEWEST


def refusal(text: str | None = None) -> str | None:
    """The one line that refuses an untested Ray, or None when this Ray may run."""
    if tested(text) or os.environ.get(UNTESTED) == "1":
        return None
    have = text or ray.__version__
    return (f"Ray {have} is outside the versions apexrl is tested on ({RANGE}); install one of them "
            f"(pip install 'ray[default,tune]{RANGE}') or set {UNTESTED}=1 to try this one with Ray's stock "
            "start-up")


@lru_cache(maxsize=1)
def token_auth() -> bool:
    """Whether this Ray authenticates clients with a token (2.52+), as apexrl drives it: a per-process
    cache of the token that can be told to read the environment again."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:
        return False
    return hasattr(Config, "initialize") and hasattr(AuthenticationTokenLoader, "instance")


NO_TOKEN = ("Ray {version} has no token authentication (Ray 2.52 added it): this private run listens on "
            "loopback only, where any user logged in to this machine can reach it; on a shared machine use "
            "Ray >= 2.52")


def quiet_tips() -> None:
    """Ray 2.5x's ``ray.init`` prints a FutureWarning on every start about a default it will change for
    accelerator variables (``num_gpus=0``); it asks nothing of apexrl's users, whose roles set their GPUs."""
    warnings.filterwarnings("ignore", category=FutureWarning,
                            message="Tip: In future versions of Ray, Ray will no longer override accelerator")
