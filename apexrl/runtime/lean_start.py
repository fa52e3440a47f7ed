"""A private Ray's lean start-up: Ray's ``ray.init`` without the processes a one-node private run never
uses, and without its waits for nothing. It reaches into Ray's internals, so it is gated: it runs only on a
Ray in the tested range (``ray_compat``) whose every private name below is there with the shape it had when
tested (:func:`problem`); otherwise, or when it fails, ``private_ray`` starts Ray as Ray ships it.

What it changes, for the length of ``ray.init`` only (``lean_node``):

- the autoscaler monitor (no cluster to scale), the dashboard head (its web UI is off unless
  ``--dashboard``) and the log monitor (replaced by a driver thread, ``ray_logs.py``) are left out, as
  ``ray start`` can (``no_monitor``, ``include_log_monitor``): ~170 MB and ~1 s on a 2-core laptop;
- the raylet's two agents (metrics and jobs; runtime envs: ~135 MB) are ``ray_agents.py``'s stand-ins
  (Ray 2.54+, whose agents report their ports in files as the stand-ins do);
- its worker processes run ``ray_worker.py``, which imports the roles' modules (not torch) at once;
- the driver does not import the dashboard's dependencies to choose the agents' mode (~23 MB, ~0.2 s);
- Ray's wait for the new raylet polls every 10 ms (``await_node``) instead of sleeping a second, and
  connections to the raylet retry every 50 ms (``quick_retries``).

A lean start that goes wrong in a way the gate cannot see beforehand (a stand-in the raylet does not
accept, so it never registers) raises :class:`LeanStartFailed` within ``REGISTER_S`` instead of Ray's own
30 s wait, and ``private_ray`` starts Ray's stock processes instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

REGISTER_S = 10.0  # the raylet registers in well under 1 s on a 2-core laptop


class LeanStartFailed(Exception):  # not RuntimeError: Ray retries get_node on those
    """The lean start-up did not bring a node up; Ray's stock start-up follows."""


def _params(fn: Any) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def _checks() -> list[tuple[str, Callable[[], bool]]]:
    """Each private name the lean start uses, with how it must look."""
    from ray._private import node, ray_constants, services
    from ray._private.parameter import RayParams

    return [
        ("RayParams(no_monitor, include_log_monitor, worker_path)",
         lambda: {"no_monitor", "include_log_monitor", "worker_path"} <= set(_params(RayParams))),
        ("Node.__init__(ray_params, ...)", lambda: _params(node.Node.__init__)[:1] == ["ray_params"]),
        ("Node.start_api_server", lambda: callable(node.Node.start_api_server)),
        ("services.start_ray_process(command, process_type, ...)",
         lambda: _params(services.start_ray_process)[:2] == ["command", "process_type"]),
        ("services.get_node(gcs_address, node_id)",
         lambda: _params(services.get_node) == ["gcs_address", "node_id"]),
        ("services.RAY_PATH", lambda: os.path.isdir(services.RAY_PATH)),
        ("ray_constants.PROCESS_TYPE_RAYLET", lambda: isinstance(ray_constants.PROCESS_TYPE_RAYLET, str)),
        ("ray._private.workers.default_worker",
         lambda: importlib.util.find_spec("ray._private.workers.default_worker") is not None),
    ]


def problem() -> str | None:
    """Why the lean start-up cannot run on this Ray (one line), or None when it can."""
    import ray

    from apexrl.runtime import ray_compat

    if not ray_compat.tested():
        return f"Ray {ray.__version__} is not a tested version"
    try:
        checks = _checks()
    except (ImportError, AttributeError) as e:
        return f"Ray {ray.__version__} lacks {e}"
    for name, ok in checks:
        try:
            good = ok()
        except (ImportError, AttributeError, TypeError, ValueError):
            good = False
        if not good:
            return f"Ray {ray.__version__}'s {name} is not as apexrl knows it"
    return None


def stand_ins_fit() -> bool:
    """Whether this Ray's agents report their ports the way the stand-ins do (files, Ray 2.54+); before,
    the driver chose the ports and Ray's own agents run."""
    try:
        from ray._raylet import persist_port  # noqa: F401
    except ImportError:
        return False
    return True


def log_publisher() -> Callable[[str, Any], Any] | None:
    """How to build what Ray's ``LogMonitor`` publishes through (given the GCS address and this process's
    GCS client), or None when its constructor is not one we know: then Ray's own log monitor runs."""
    try:
        from ray._private.log_monitor import LogMonitor, is_proc_alive  # noqa: F401
        first = _params(LogMonitor.__init__)[:4]
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    if first == ["node_ip_address", "logs_dir", "gcs_client", "is_proc_alive_fn"]:  # seen in 2.53-2.60
        return lambda gcs_address, client: client
    if first == ["node_ip_address", "logs_dir", "gcs_publisher", "is_proc_alive_fn"]:  # seen in 2.40
        from ray._raylet import GcsPublisher

        return lambda gcs_address, client: GcsPublisher(address=gcs_address)
    return None


@contextlib.contextmanager
def lean_node(keep_dashboard: bool, drop_log_monitor: bool) -> Iterator[None]:
    """While open, a head node that ``ray.init`` starts is lean (above). Call only when :func:`problem`
    found none. ``drop_log_monitor``: the caller tails worker logs itself, or nobody reads them."""
    from ray._private import node as node_mod
    from ray._private import ray_constants, services, utils

    Node = node_mod.Node
    original_init, original_api = Node.__init__, Node.start_api_server
    original_start, original_get_node = services.start_ray_process, services.get_node
    original_deps = getattr(utils, "get_dashboard_dependency_error", None)  # Ray 2.4x: not asked

    def init(self: Any, ray_params: Any, *args: Any, **kw: Any) -> None:
        ray_params.no_monitor = True
        ray_params.include_log_monitor = not drop_log_monitor
        ray_params.worker_path = str(Path(__file__).with_name("ray_worker.py"))
        original_init(self, ray_params, *args, **kw)

    def no_api_server(self: Any, **kw: Any) -> None:
        self._webui_url = None

    stand_ins = not keep_dashboard and stand_ins_fit()
    raylet: list[Any] = []

    def start_process(command: list[str], process_type: str, *a: Any, **kw: Any) -> Any:
        if process_type != ray_constants.PROCESS_TYPE_RAYLET:
            return original_start(command, process_type, *a, **kw)
        info = original_start(stand_in_agents(command, services.RAY_PATH) if stand_ins else command,
                              process_type, *a, **kw)
        raylet.append(getattr(info, "process", None))
        return info

    def raylet_alive() -> bool:
        return not raylet or not hasattr(raylet[0], "poll") or raylet[0].poll() is None

    def get_node(gcs_address: str, node_id: str) -> Any:
        if await_node(gcs_address, node_id, alive=raylet_alive) is False:
            raise LeanStartFailed("the raylet exited" if not raylet_alive()
                                  else f"the raylet did not register in {REGISTER_S:.0f} s")
        return original_get_node(gcs_address, node_id)

    Node.__init__ = init  # type: ignore[method-assign]
    services.get_node, services.start_ray_process = get_node, start_process
    if not keep_dashboard:
        Node.start_api_server = no_api_server  # type: ignore[method-assign]
        # Asked only to start the agents in their minimal mode; importing the dashboard's dependencies to
        # answer (aiohttp, grpc, pydantic, opentelemetry) cost the driver ~23 MB and ~0.2 s.
        if original_deps is not None:
            utils.get_dashboard_dependency_error = lambda: None
    try:
        yield
    finally:
        Node.__init__, Node.start_api_server = original_init, original_api  # type: ignore[method-assign]
        services.start_ray_process, services.get_node = original_start, original_get_node
        if original_deps is not None:
            utils.get_dashboard_dependency_error = original_deps


def quick_retries() -> dict[str, int]:
    """Ray's processes connect to the raylet's and the object store's sockets with up to 10 attempts 1 s
    apart; the raylet's own object manager races its store thread for that socket, lost the race in about
    one start of two here and waited a whole second. The same 10 s in 50 ms steps, for the names this Ray
    knows."""
    try:
        from ray._raylet import Config
    except ImportError:
        return {}
    keys = {"raylet_client_connect_timeout_milliseconds": 50, "raylet_client_num_connect_attempts": 200}
    return {k: v for k, v in keys.items() if hasattr(Config, k)}


def await_node(gcs_address: str, node_id: str, timeout_s: float = REGISTER_S,
               alive: Callable[[], bool] = lambda: True) -> bool | None:
    """Until the new raylet has registered with the GCS (~0.2 s here): True. Ray asks once, 0.1 s after
    starting it, and when it is not there yet waits a whole second before asking again (~0.9 s of every
    start-up on a 2-core laptop). False when it did not register in ``timeout_s`` or is no longer ``alive``
    (a stand-in agent the raylet did not accept ends the raylet at once); None, with one warning,
    when this Ray's GCS client does not answer as expected (Ray's own wait then decides)."""
    try:
        from ray._raylet import GcsClient, NodeID

        want, client = NodeID.from_hex(node_id), GcsClient(address=gcs_address)
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        return _unrecognized(e)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        try:
            nodes = client.get_all_node_info(timeout=1)
        except (AttributeError, TypeError) as e:
            return _unrecognized(e)
        except Exception:  # noqa: BLE001 - a slow GCS: ask again
            nodes = {}
        if not isinstance(nodes, Mapping) or (nodes and not isinstance(next(iter(nodes)), NodeID)):
            return _unrecognized(f"get_all_node_info answered a {type(nodes).__name__}")
        if want in nodes:
            return True
        time.sleep(0.01)
    return False


def _unrecognized(why: object) -> None:
    import ray

    log.warning("Ray %s's GCS client does not answer as apexrl expects (%s); Ray's own wait for its node "
                "(1 s steps) instead", ray.__version__, why)
    return None


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
