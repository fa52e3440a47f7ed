"""A private Ray that only this process's owner can reach: every socket on loopback, a fresh token.

Ray decides where its servers listen from ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``, read by ``ray_constants``
when ``ray`` is imported and by every process Ray spawns. A user's shell does not set it, and ``ray`` is
usually imported before we know the run is private, so both the constant and the variable are set here,
right before ``ray.init``; the sockets are then checked, and a private Ray that listens beyond loopback is
shut down and refused (fails closed, whatever a Ray release changed). Loopback alone still lets other
local users connect (a login node, a shared workstation), so where Ray has token authentication (2.52+)
the private Ray also asks for a token that only this run holds: 256 random bits in a 0600 file in a 0700
directory, never printed, removed when Ray is shut down. An older Ray says at start-up that loopback is
all that protects the run. A watchdog (``reaper.py``) ends the private Ray's processes if this process
dies without shutting it down.

Ray starts lean where the gate allows (``lean_start.py``: ~1 s and ~350 MB less for a small run); if the
lean start fails, Ray's stock start follows with one warning. A start that fails altogether undoes itself
(watchdog, token, environment, every process it started) before the error reaches the caller.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import ray

from apexrl.runtime import lean_start, ray_compat

log = logging.getLogger(__name__)

_LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_AUTH_MODE = "RAY_AUTH_MODE"
_TOKEN = "RAY_AUTH_TOKEN"
_TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"
_MANAGED = (_LOOPBACK, _AUTH_MODE, _TOKEN, _TOKEN_PATH)
LOOPBACK = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})

_saved: dict[str, str | None] | None = None
_token_dir: Path | None = None
_reaper: subprocess.Popen | None = None
_forwarder: Any = None
_restore_serializers: Callable[[], None] | None = None


class NotLoopback(RuntimeError):
    """A private Ray listened beyond loopback; it was shut down."""


def start(num_cpus: int, dashboard: bool, **kwargs: Any) -> None:
    """``ray.init`` of a new local Ray, reachable only on loopback and (where Ray has it) only with this
    run's token. On any failure, everything it set up is undone before the error propagates."""
    global _saved, _reaper
    before = _descendants()
    try:
        _reaper = subprocess.Popen([sys.executable, str(Path(__file__).with_name("reaper.py")), str(os.getpid())],
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True, text=True)
        before.add(_reaper.pid)
        _saved = {k: os.environ.get(k) for k in _MANAGED}
        _loopback_only()
        if ray_compat.token_auth():
            _use_new_token()
        else:
            log.warning(ray_compat.NO_TOKEN.format(version=ray.__version__))
        kwargs["_system_config"] = {**lean_start.quick_retries(), **kwargs.get("_system_config", {})}
        kwargs.update(num_cpus=num_cpus, include_dashboard=dashboard)
        why_not = lean_start.problem()
        if why_not is None:
            _start_lean(dashboard, kwargs, before)
        else:
            log.warning("%s; Ray's stock start-up (about 1 s and 350 MB more than apexrl's lean one)", why_not)
            _init(kwargs)
        check_loopback(_descendants() - before)
    except BaseException:
        _end_started(before)
        stop()
        raise


def _init(kwargs: dict[str, Any]) -> None:
    ray.init(address="local", dashboard_host="127.0.0.1", _node_ip_address="127.0.0.1", **kwargs)


def _start_lean(dashboard: bool, kwargs: dict[str, Any], before: set[int]) -> None:
    global _forwarder, _restore_serializers
    from apexrl.runtime.ray_worker import lean_serializers

    _restore_serializers = lean_serializers()
    to_driver = kwargs.get("log_to_driver", True)
    publisher = lean_start.log_publisher() if to_driver else None
    try:
        # Ray's log monitor only feeds the driver's console: left out where the driver tails or nobody reads.
        with lean_start.lean_node(keep_dashboard=dashboard, drop_log_monitor=publisher is not None or not to_driver):
            _init(kwargs)
    except Exception as e:  # noqa: BLE001 - whatever the lean start tripped on, Ray's own start may not
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        log.warning("Ray %s: apexrl's lean start-up failed (%s); Ray's stock start-up instead",
                    ray.__version__, first[:200])
        _end_started(before)
        _init(kwargs)
        return
    if publisher is not None:
        from apexrl.runtime.ray_logs import LogForwarder

        try:
            worker = ray._private.worker
            node = worker._global_node
            _forwarder = LogForwarder(node, publisher(node.gcs_address, worker.global_worker.gcs_client))
        except Exception as e:  # noqa: BLE001 - the run goes on; its workers' output stays in Ray's log files
            log.warning("Ray %s: workers' output is not shown here (%s); it is in the session's log files "
                        "under Ray's temp dir (/tmp/ray/session_latest/logs)", ray.__version__, e)


def _descendants() -> set[int]:
    try:
        return {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()


def _end_started(before: set[int]) -> None:
    """A failed ``ray.init`` leaves its half-started node behind: shut Ray down, then end by PID every
    process it started (ours alone: this process's descendants that were not there ``before``)."""
    ray.shutdown()
    procs = []
    for pid in _descendants() - before:
        try:
            p = psutil.Process(pid)
            p.kill()
            procs.append(p)
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)


def _loopback_only() -> None:
    import ray._private.ray_constants as ray_constants

    os.environ[_LOOPBACK] = "0"
    if hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):
        ray_constants.ENABLE_RAY_CLUSTER = False  # else: check_loopback decides


def check_loopback(pids: set[int]) -> None:
    """Fail closed: NotLoopback when any of ``pids`` (the processes this private Ray started) listens beyond
    loopback. Its servers and prestarted workers are up by now; those Ray starts later get the same
    settings. The driver's own process is left out: its sockets may be the user's program's."""
    tree = []
    for pid in pids:
        try:
            tree.append(psutil.Process(pid))
        except psutil.Error:
            pass
    exposed = _exposed_linux(tree)
    if exposed is None:  # not Linux: psutil per process (~50 ms for a small run's dozen processes)
        exposed = []
        for p in tree:
            try:
                exposed += [f"{p.name()} on {c.laddr.ip}:{c.laddr.port}" for c in p.net_connections(kind="inet")
                            if c.status == psutil.CONN_LISTEN and c.laddr.ip not in LOOPBACK]
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
    if exposed:
        raise NotLoopback(f"Ray {ray.__version__} did not keep the private run on loopback ({exposed[0]}); "
                          "refusing to run. Start Ray yourself (ray start --head --node-ip-address=127.0.0.1) "
                          "and pass --address, or use a Ray in " + ray_compat.RANGE)


def _exposed_linux(tree: list[psutil.Process]) -> list[str] | None:
    """The host's listening TCP sockets beyond loopback, read once from /proc/net (~1 ms), then whether a
    process of ``tree`` holds one; None where /proc/net is not there."""
    beyond: dict[str, str] = {}
    try:
        for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
            with open(f"/proc/net/{name}") as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] != "0A":  # TCP_LISTEN
                        continue
                    address, port = _proc_address(fields[1], family)
                    if not ipaddress.ip_address(address).is_loopback:  # IPv4-mapped read as IPv4
                        beyond[fields[9]] = f"{address}:{port}"
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    exposed = []
    for p in tree if beyond else []:
        try:
            for fd in os.listdir(f"/proc/{p.pid}/fd"):
                target = os.readlink(f"/proc/{p.pid}/fd/{fd}")
                if target.startswith("socket:[") and target[8:-1] in beyond:
                    exposed.append(f"{p.name()} on {beyond[target[8:-1]]}")
        except (OSError, psutil.Error):
            pass
    return exposed


def _proc_address(text: str, family: int) -> tuple[str, int]:
    """/proc/net/tcp's ``HEXADDR:HEXPORT``: the address as 32-bit words in host byte order."""
    address, port = text.split(":")
    words = [int(address[i:i + 8], 16) for i in range(0, len(address), 8)]
    raw = struct.pack(f"={len(words)}I", *words)
    if family == socket.AF_INET6 and raw[:12] == b"\0" * 10 + b"\xff\xff":
        return socket.inet_ntop(socket.AF_INET, raw[12:]), int(port, 16)  # IPv4-mapped
    return socket.inet_ntop(family, raw), int(port, 16)


def _use_new_token() -> None:
    global _token_dir
    _token_dir = Path(tempfile.mkdtemp(prefix="apexrl-ray-"))  # mkdtemp makes it 0700
    token_file = _token_dir / "auth_token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    os.environ[_AUTH_MODE] = "token"
    os.environ.pop(_TOKEN, None)  # it would win over the file
    os.environ[_TOKEN_PATH] = str(token_file)
    reload_auth()
    # With a token set, Ray logs on every start that token auth is on; that is the point here.
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)


def stop() -> None:
    """``ray.shutdown``, then this process's Ray settings as they were and the token gone. Safe to call
    when no private Ray was started, or one only half started (it only shuts Ray down)."""
    global _saved, _token_dir, _reaper, _forwarder, _restore_serializers
    if _forwarder is not None:
        _forwarder.stop()
        _forwarder = None
    ray.shutdown()
    if _restore_serializers is not None:
        _restore_serializers()
        _restore_serializers = None
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
    if hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):
        ray_constants.ENABLE_RAY_CLUSTER = ray_constants.env_bool(_LOOPBACK, not ray_constants.IS_WINDOWS_OR_OSX)
    if _token_dir is not None:
        shutil.rmtree(_token_dir, ignore_errors=True)
        reload_auth()
    _saved = _token_dir = None


def reload_auth() -> None:
    """Ray caches its auth mode and token per process; make it read the environment again."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    loader = AuthenticationTokenLoader.instance()
    if hasattr(loader, "reset_cache"):
        loader.reset_cache()
    else:
        log.warning("Ray %s cannot be told to read its token again: a second private run in this process "
                    "may present the first one's token and be refused", ray.__version__)

