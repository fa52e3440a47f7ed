"""A private Ray that only this process's owner can reach: every socket on loopback, a fresh token.

Ray decides where its servers listen from ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``, read by ``ray_constants``
when ``ray`` is imported and by every process Ray spawns. A user's shell does not set it, and ``ray`` is
usually imported before we know the run is private, so both the constant and the variable are set here,
right before ``ray.init``. Loopback alone still lets other local users connect (a login node, a shared
workstation), so the private Ray also asks for a token that only this run holds: 256 random bits in a 0600
file in a 0700 directory, never printed, removed when Ray is shut down. A watchdog (``reaper.py``) ends
the private Ray's processes if this process dies without shutting it down.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import ray

_LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_AUTH_MODE = "RAY_AUTH_MODE"
_TOKEN = "RAY_AUTH_TOKEN"
_TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"
_MANAGED = (_LOOPBACK, _AUTH_MODE, _TOKEN, _TOKEN_PATH)

_saved: dict[str, str | None] | None = None
_token_dir: Path | None = None
_reaper: subprocess.Popen | None = None


def start(num_cpus: int, dashboard: bool, **kwargs: Any) -> None:
    """``ray.init`` of a new local Ray, reachable only on loopback and only with this run's token."""
    global _saved, _token_dir, _reaper
    import ray._private.ray_constants as ray_constants

    _reaper = subprocess.Popen([sys.executable, str(Path(__file__).with_name("reaper.py")), str(os.getpid())],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, text=True)
    _saved = {k: os.environ.get(k) for k in _MANAGED}
    _token_dir = Path(tempfile.mkdtemp(prefix="apexrl-ray-"))  # mkdtemp makes it 0700
    token_file = _token_dir / "auth_token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    os.environ[_LOOPBACK] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    os.environ[_AUTH_MODE] = "token"
    os.environ.pop(_TOKEN, None)  # it would win over the file
    os.environ[_TOKEN_PATH] = str(token_file)
    _reload_auth()
    # With a token set, Ray logs on every start that token auth is on; that is the point here.
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    try:
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=dashboard, dashboard_host="127.0.0.1",
                 _node_ip_address="127.0.0.1", **kwargs)
    except BaseException:
        stop()
        raise


def stop() -> None:
    """``ray.shutdown``, then this process's Ray settings as they were and the token gone. Safe to call
    when no private Ray was started (it only shuts Ray down)."""
    global _saved, _token_dir, _reaper
    ray.shutdown()
    if _reaper is not None:
        try:
            _reaper.communicate("done\n", timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            _reaper.kill()
        _reaper = None
    if _saved is None:
        return
    import ray._private.ray_constants as ray_constants

    for k, v in _saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    ray_constants.ENABLE_RAY_CLUSTER = ray_constants.env_bool(_LOOPBACK, not ray_constants.IS_WINDOWS_OR_OSX)
    if _token_dir is not None:
        shutil.rmtree(_token_dir, ignore_errors=True)
    _saved = _token_dir = None
    _reload_auth()


def _reload_auth() -> None:
    """Ray caches its auth mode and token per process; make it read the environment again."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
