"""Starting or joining Ray: a private loopback Ray by default, a cluster by ``--address``; clear errors."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError

from apexrl.runtime import private_ray, ray_compat

log = logging.getLogger(__name__)


class ClusterError(RuntimeError):
    """Ray could not be started or reached; the message says how to fix it."""


JOIN_WAIT_S = 30.0  # how long a head that answers may take to accept a driver
_early = False  # a private Ray started ahead by start_early, not yet taken over by init_ray


def start_early(num_cpus: int, dashboard: bool = False) -> None:
    """Start the private Ray now, for the next ``init_ray(None, ...)`` in this process to take over: the CLI
    starts it while torch and the agents are still being imported (~1 s sooner on a 2-core laptop). Whoever
    calls this calls :func:`release_early` when done (it shuts Ray down if nothing took it over)."""
    global _early
    if not ray.is_initialized():
        init_ray(None, num_cpus, dashboard)
        _early = True


def release_early() -> None:
    global _early
    if _early:
        _early = False
        shutdown_ray()


def init_ray(address: str | None, num_cpus: int, dashboard: bool = False) -> bool:
    """Start a private loopback Ray (no address) or join a cluster; return whether we started it (or take
    over the one :func:`start_early` started)."""
    global _early
    if ray.is_initialized():
        taken, _early = _early and address is None, False
        return taken
    ray_compat.quiet_tips()
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": True}
    if address is None:
        _require_tested_ray()  # an --address run is refused by check_cluster below
        # Loopback only, this run's token, dashboard off unless asked: anyone who reaches a Ray runs code as us.
        try:
            private_ray.start(num_cpus, dashboard, **kwargs)
        except private_ray.NotLoopback as e:
            raise ClusterError(str(e)) from None
        return True
    check_cluster(address)
    deadline = time.monotonic() + JOIN_WAIT_S
    while True:
        try:
            ray.init(address=address, **kwargs)
            return True
        except ConnectionError as e:
            # A head whose GCS answers but whose raylet has not registered yet: Ray 2.54-2.5x refuse at once
            # (an empty ConnectionError within 0.1 s of `ray start`), where Ray 2.60 waits.
            ray.shutdown()
            if time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            err: Exception = e
        except (RuntimeError, ValueError) as e:
            err = e
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ClusterError(f"cannot reach a Ray cluster at --address {address} ({first}); start one with "
                           "'ray start --head --port=6379' and pass --address auto or HOST:6379") from None


def _require_tested_ray() -> None:
    refused = ray_compat.refusal()
    if refused:
        raise ClusterError(refused)


def shutdown_ray() -> None:
    """End the Ray this process started (private or joined) and undo what a private one set."""
    private_ray.stop()


def check_cluster(address: str) -> None:
    """ClusterError unless a Ray head answers at ``address`` and accepts this machine (its token, if it
    wants one); sets RAY_AUTH_MODE=token for this process and its children when the head needs it."""
    _require_tested_ray()
    target = _check_reachable(address)
    if target and ray_compat.token_auth():  # an older Ray's clusters take no token
        _authenticate(address, target)


def _authenticate(address: str, target: str) -> None:
    """Ray turns on token authentication for ``ray start`` clusters when a token exists, but a driver that
    connects by HOST:PORT only sends its token if ``RAY_AUTH_MODE=token`` is set. Ask the head whether it
    wants a token; if it does and one is available here (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
    ``~/.ray/auth_token``), send it; otherwise say exactly that, instead of Ray's retry loop ending in
    "failed to connect"."""
    explicit = os.environ.get(_AUTH_MODE)
    if explicit is not None and explicit.lower() != "token":
        if _gcs_refuses(target):
            raise ClusterError(f"the Ray cluster at --address {address} requires token authentication but "
                               f"{_AUTH_MODE}={explicit}; unset it or set {_AUTH_MODE}=token")
        return
    if explicit is None and not _gcs_refuses(target):
        return
    if explicit is None:
        if not _token_available():
            raise ClusterError(f"the Ray cluster at --address {address} requires token authentication and no token "
                               "is set here: copy the head's token (`ray get-auth-token` on the head) into "
                               "RAY_AUTH_TOKEN or ~/.ray/auth_token")
        os.environ[_AUTH_MODE] = "token"  # for this process and the ones it starts
        private_ray.reload_auth()
    if _gcs_refuses(target):
        raise ClusterError(f"the Ray cluster at --address {address} refused this machine's token "
                           "(authentication failed): use the head's token (`ray get-auth-token` on the head) "
                           "in RAY_AUTH_TOKEN or ~/.ray/auth_token")
    log.info("connecting to %s with token authentication", target)


_AUTH_MODE = "RAY_AUTH_MODE"


def _token_available() -> bool:
    """Whether Ray would find a token here: where it looks, in its order."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    return Path(path if path else Path.home() / ".ray" / "auth_token").is_file()


def _gcs_refuses(target: str) -> bool:
    """One cheap authenticated call to the head's GCS: True only for an authentication refusal."""
    try:
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError as e:  # another Ray's names: ray.init finds out and says what it finds
        log.warning("Ray %s: cannot ask %s whether it wants a token (%s)", ray.__version__, target, e)
        return False
    try:
        with _quiet_stderr():  # Ray's C++ client logs each refusal as a warning of its own
            GcsClient(address=target).internal_kv_get(b"apexrl-probe", namespace=None, timeout=5)
    except AuthenticationError:
        return True
    except Exception as e:  # anything else is ray.init's to report
        log.debug("GCS probe of %s: %s", target, e)
    return False


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _check_reachable(address: str) -> str:
    """Fail in seconds with a clear message instead of letting ray.init retry for minutes. Returns the
    GCS HOST:PORT, or "" for client/HTTP addresses."""
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
        return ""
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"--address {address}: expected 'auto' or HOST:PORT such as 10.0.0.1:6379")
    try:
        with socket.create_connection((host, int(port)), timeout=5.0):
            pass
    except OSError as e:
        raise ClusterError(f"cannot reach a Ray cluster at --address {address} ({target}: {e.strerror or e}); "
                           "start one with 'ray start --head --port=6379' and check host, port and firewall") from None
    return target


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
