"""Starting or joining Ray: a private loopback Ray by default, a cluster by ``--address``; clear errors."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError

log = logging.getLogger(__name__)


class ClusterError(RuntimeError):
    """Ray could not be started or reached; the message says how to fix it."""


def init_ray(address: str | None, num_cpus: int, dashboard: bool = False) -> bool:
    """Start a private loopback Ray (no address) or join a cluster; return whether we started it."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": True}
    if address is None:
        # Loopback only, dashboard off unless asked: an exposed Ray dashboard/jobs API runs anyone's code.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=dashboard,
                 _node_ip_address="127.0.0.1", **kwargs)
        return True
    _check_reachable(address)
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ClusterError(f"cannot reach a Ray cluster at --address {address} ({first}); start one with "
                           "'ray start --head --port=6379' and pass --address auto or HOST:6379") from None
    return True


def _check_reachable(address: str) -> None:
    """Fail in seconds with a clear message instead of letting ray.init retry for minutes."""
    target = address
    if address == "auto":
        target = os.environ.get("RAY_ADDRESS", "")
        if not target:
            current = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray" / "ray_current_cluster"
            target = current.read_text().strip() if current.exists() else ""
        if not target:
            raise ClusterError("--address auto found no running Ray cluster on this machine; start one with "
                               "'ray start --head --port=6379' (or pass --address HOST:6379)")
    if target.startswith(("ray://", "http://", "https://")):
        return
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"--address {address}: expected 'auto' or HOST:PORT such as 10.0.0.1:6379")
    try:
        with socket.create_connection((host, int(port)), timeout=5.0):
            pass
    except OSError as e:
        raise ClusterError(f"cannot reach a Ray cluster at --address {address} ({target}: {e.strerror or e}); "
                           "start one with 'ray start --head --port=6379' and check host, port and firewall") from None


def ship_by_value(fn: Any) -> None:
    """User code (a model factory in a script or notebook module) may not be importable on the workers:
    let Ray pickle its module by value instead of by name."""
    mod = sys.modules.get(getattr(fn, "__module__", "") or "")
    if mod is None or mod.__name__ in ("__main__", "builtins") or mod.__name__.split(".")[0] == "apexrl":
        return
    try:
        ray.cloudpickle.register_pickle_by_value(mod)
    except Exception as e:  # pragma: no cover - e.g. a C extension module
        log.debug("cannot ship %s by value: %s", mod.__name__, e)


def sigterm_as_interrupt() -> Any:
    """SIGTERM (a scheduler's or a preemptible VM's stop) takes the same path as Ctrl-C: final checkpoint,
    bounded shutdown. Returns the previous handler, or None off the main thread (nothing installed)."""
    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM stops at once
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return None


def cause(err: BaseException) -> str:
    """The user-relevant line of a Ray error: the original exception, not Ray's wrapper text."""
    inner = getattr(err, "cause", None)
    if isinstance(inner, BaseException):
        text = f"{type(inner).__name__}: {inner}".strip().splitlines()[0]
    else:
        lines = [x.strip() for x in str(err).splitlines() if x.strip()]
        text = lines[-1] if lines else type(err).__name__
        if isinstance(err, RayActorError) and "Worker exit detail: " in text:  # killed, not an exception
            text = "its process died (" + text.split("Worker exit detail: ")[1].split(".")[0] + ")"
    return text if len(text) <= 200 else text[:197] + "..."
