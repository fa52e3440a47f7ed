"""A private Ray that only this process's owner can reach: every socket on loopback, a fresh token.

Ray decides where its servers listen from ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``, read by ``ray_constants``
when ``ray`` is imported and by every process Ray spawns. A user's shell does not set it, and ``ray`` is
usually imported before we know the run is private, so both the constant and the variable are set here,
right before ``ray.init``. Loopback alone still lets other local users connect (a login node, a shared
workstation), so the private Ray also asks for a token that only this run holds: 256 random bits in a 0600
file in a 0700 directory, never printed, removed when Ray is shut down. A watchdog (``reaper.py``) ends
the private Ray's processes if this process dies without shutting it down.

A private run is one node whose driver is on it, so three of the processes ``ray.init`` starts have
nothing to do (``lean_node``): the autoscaler monitor (no cluster to scale), the dashboard head (its web UI
is off unless ``--dashboard``; without it, it serves usage statistics only) and the log monitor (replaced by
a driver thread, ``ray_logs.py``). Together ~170 MB and ~1 s of start-up and shutdown on a 2-core laptop.
``ray.init`` offers no switch for them, so ``lean_node`` sets the node's own parameters (``no_monitor``,
``include_log_monitor``, as ``ray start`` has them) for the length of the call. The raylet's two agents
(metrics and jobs; runtime envs: ~135 MB) will not be left out, so without the dashboard they are
``ray_agents.py``'s small stand-ins. Its worker processes run ``ray_worker.py``, which starts importing
the roles' modules (not torch) before a role is asked of them. ``ray.init`` itself waited ~0.9 s for
nothing (``await_node``, ``quick_retries``) and imported the dashboard's dependencies into the driver to
choose the agents' mode. With all of it, a private Ray is up in ~1 s here instead of ~2 s.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ray

log = logging.getLogger(__name__)

_LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_AUTH_MODE = "RAY_AUTH_MODE"
_TOKEN = "RAY_AUTH_TOKEN"
_TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"
_MANAGED = (_LOOPBACK, _AUTH_MODE, _TOKEN, _TOKEN_PATH)

_saved: dict[str, str | None] | None = None
_token_dir: Path | None = None
_reaper: subprocess.Popen | None = None
_forwarder: Any = None
_restore_serializers: Callable[[], None] | None = None


def start(num_cpus: int, dashboard: bool, **kwargs: Any) -> None:
    """``ray.init`` of a new local Ray, reachable only on loopback and only with this run's token."""
    global _saved, _token_dir, _reaper, _forwarder, _restore_serializers
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
        from apexrl.runtime.ray_worker import lean_serializers

        _restore_serializers = lean_serializers()
        kwargs["_system_config"] = {**quick_retries(), **kwargs.get("_system_config", {})}
        with lean_node(keep_dashboard=dashboard) as lean:
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=dashboard, dashboard_host="127.0.0.1",
                     _node_ip_address="127.0.0.1", **kwargs)
        if lean and kwargs.get("log_to_driver", True):
            from apexrl.runtime.ray_logs import LogForwarder

            worker = ray._private.worker
            _forwarder = LogForwarder(worker._global_node, worker.global_worker.gcs_client)
    except BaseException:
        stop()
        raise


@contextlib.contextmanager
def lean_node(keep_dashboard: bool) -> Iterator[bool]:
    """While open, a head node that ``ray.init`` starts runs without the autoscaler monitor, the log
    monitor and (unless ``keep_dashboard``) the dashboard head and Ray's agents, with ``ray_worker.py`` as
    its worker. Yields
    whether it could (Ray's internals as expected); otherwise Ray starts as usual."""
    from ray._private import node as node_mod
    from ray._private import ray_constants, services, utils
    from ray._private.parameter import RayParams

    Node = node_mod.Node
    params = inspect.signature(RayParams).parameters
    if not ("no_monitor" in params and "include_log_monitor" in params and hasattr(Node, "start_api_server")
            and hasattr(services, "start_ray_process") and hasattr(services, "get_node")
            and hasattr(utils, "get_dashboard_dependency_error")):
        log.debug("Ray %s: cannot leave out its monitor processes; starting them", ray.__version__)
        yield False
        return
    original_init, original_api = Node.__init__, Node.start_api_server
    original_start, original_get_node = services.start_ray_process, services.get_node

    def init(self: Any, ray_params: Any, *args: Any, **kw: Any) -> None:
        ray_params.no_monitor = True
        ray_params.include_log_monitor = False
        ray_params.worker_path = str(Path(__file__).with_name("ray_worker.py"))  # roles' modules imported at once
        original_init(self, ray_params, *args, **kw)

    def no_api_server(self: Any, **kw: Any) -> None:
        self._webui_url = None

    def start_process(command: list[str], process_type: str, *a: Any, **kw: Any) -> Any:
        if process_type == ray_constants.PROCESS_TYPE_RAYLET:
            command = stand_in_agents(command, services.RAY_PATH)
        return original_start(command, process_type, *a, **kw)

    def get_node(gcs_address: str, node_id: str) -> Any:
        await_node(gcs_address, node_id)
        return original_get_node(gcs_address, node_id)

    Node.__init__ = init  # type: ignore[method-assign]
    services.get_node = get_node
    original_deps = utils.get_dashboard_dependency_error
    if not keep_dashboard:
        Node.start_api_server = no_api_server  # type: ignore[method-assign]
        services.start_ray_process = start_process
        # Asked only to start the agents in their minimal mode; importing the dashboard's dependencies to
        # answer (aiohttp, grpc, pydantic, opentelemetry) cost the driver ~23 MB and ~0.2 s.
        utils.get_dashboard_dependency_error = lambda: None
    try:
        yield True
    finally:
        Node.__init__, Node.start_api_server = original_init, original_api  # type: ignore[method-assign]
        services.start_ray_process, services.get_node = original_start, original_get_node
        utils.get_dashboard_dependency_error = original_deps


def quick_retries() -> dict[str, int]:
    """Ray's processes connect to the raylet's and the object store's sockets with up to 10 attempts 1 s
    apart; the raylet's own object manager races its store thread for that socket, lost the race in about
    one start of two here and waited a whole second. The same 10 s in 50 ms steps."""
    from ray._raylet import Config

    keys = {"raylet_client_connect_timeout_milliseconds": 50, "raylet_client_num_connect_attempts": 200}
    return {k: v for k, v in keys.items() if hasattr(Config, k)}  # names this Ray knows


def await_node(gcs_address: str, node_id: str, timeout_s: float = 10.0) -> bool:
    """Until the new raylet has registered with the GCS (~0.2 s here). Ray asks once, 0.1 s after starting
    it, and when it is not there yet waits a whole second before asking again: ~0.9 s of every start-up
    on a 2-core laptop. Whether it came or not, Ray's own wait follows."""
    from ray._raylet import GcsClient, NodeID

    want, deadline = NodeID.from_hex(node_id), time.monotonic() + timeout_s
    client = GcsClient(address=gcs_address)
    while time.monotonic() < deadline:
        try:
            if want in client.get_all_node_info(timeout=1):
                return True
        except Exception:  # noqa: BLE001 - GCS not answering yet; Ray's own wait reports what it finds
            pass
        time.sleep(0.01)
    return False


def stand_in_agents(raylet_command: list[str], ray_path: str) -> list[str]:
    """The raylet's command with ``ray_agents.py`` for its agents, Ray's arguments kept. An agent whose
    command is not as expected (another Ray) keeps Ray's own."""
    ours = str(Path(__file__).with_name("ray_agents.py"))
    agents = {"--dashboard_agent_command=": (os.path.join(ray_path, "dashboard", "agent.py"), "dashboard"),
              "--runtime_env_agent_command=": (os.path.join(ray_path, "_private", "runtime_env", "agent",
                                                            "main.py"), "runtime-env")}
    out = []
    for arg in raylet_command:
        for flag, (script, role) in agents.items():
            if arg.startswith(flag) and f" {script} " in arg:
                arg = arg.replace(f" {script} ", f" {subprocess.list2cmdline([ours, role])} ", 1)
        out.append(arg)
    return out


def stop() -> None:
    """``ray.shutdown``, then this process's Ray settings as they were and the token gone. Safe to call
    when no private Ray was started (it only shuts Ray down)."""
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
