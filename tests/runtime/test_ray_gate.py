"""Ray's private names behind a gate: when one of them is missing or has changed (a Ray release apexrl was
not tested on), a private run still starts — Ray's stock start-up, or the piece that leaned on it left
out — with one warning; or it refuses in one line. Never a traceback, a hang or a silent slowdown. Each
test breaks one name the way a release would and would fail without the fallback it checks."""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import ray

from apexrl.runtime import lean_start, private_ray, ray_compat

pytestmark = pytest.mark.compat


@pytest.fixture
def user_shell(monkeypatch):
    for k in list(os.environ):
        if k.startswith("RAY_"):
            monkeypatch.delenv(k)


def _drop_param(fn, name):
    """``fn`` with the same behaviour and a signature without parameter ``name`` (a changed signature)."""
    sig = inspect.signature(fn)

    def changed(*a, **kw):
        return fn(*a, **kw)

    changed.__signature__ = sig.replace(parameters=[p for p in sig.parameters.values() if p.name != name])
    return changed


def _break(monkeypatch, what):
    from ray._private import node, parameter, ray_constants, services

    if what == "RayParams":
        monkeypatch.setattr(parameter, "RayParams", _drop_param(parameter.RayParams, "include_log_monitor"))
    elif what == "Node.__init__":
        monkeypatch.setattr(node.Node, "__init__", _drop_param(node.Node.__init__, "ray_params"))
    elif what == "Node.start_api_server":
        monkeypatch.delattr(node.Node, "start_api_server")
    elif what == "services.start_ray_process":
        monkeypatch.setattr(services, "start_ray_process", _drop_param(services.start_ray_process, "process_type"))
    elif what == "services.get_node":
        monkeypatch.delattr(services, "get_node")
    elif what == "services.RAY_PATH":
        monkeypatch.setattr(services, "RAY_PATH", "/nowhere/ray")
    elif what == "ray_constants.PROCESS_TYPE_RAYLET":
        monkeypatch.delattr(ray_constants, "PROCESS_TYPE_RAYLET")
    elif what == "ray._private.workers.default_worker":
        find = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a: None if name == what else find(name, *a))
    else:
        raise AssertionError(what)


NAMES = ["RayParams", "Node.__init__", "Node.start_api_server", "services.start_ray_process", "services.get_node",
         "services.RAY_PATH", "ray_constants.PROCESS_TYPE_RAYLET", "ray._private.workers.default_worker"]


def test_this_ray_passes_the_gate():
    assert lean_start.problem() is None


@pytest.mark.parametrize("what", NAMES)
def test_a_changed_private_name_turns_the_lean_start_off_and_names_it(monkeypatch, what):
    _break(monkeypatch, what)
    assert what.split(".")[-1] in (lean_start.problem() or "")


@pytest.mark.parametrize("version", ["2.40.0", "2.53.0", "2.61.0", "3.0.0", "nightly"])
def test_a_ray_outside_the_tested_range_gets_the_stock_start_or_is_refused(monkeypatch, version):
    monkeypatch.setattr(ray, "__version__", version)
    monkeypatch.delenv(ray_compat.UNTESTED, raising=False)
    assert "is not a tested version" in lean_start.problem()
    line = ray_compat.refusal()
    assert f"Ray {version} is outside" in line and ray_compat.RANGE in line and "\n" not in line
    monkeypatch.setenv(ray_compat.UNTESTED, "1")
    assert ray_compat.refusal() is None and "is not a tested version" in lean_start.problem()


def test_the_declared_range_is_the_one_pyproject_declares():
    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert f'"ray[default,tune]{ray_compat.RANGE}"' in text
    assert ray_compat.tested()


def test_an_untested_ray_is_one_line_from_apexrl_train_before_anything_starts(monkeypatch, capsys, tmp_path):
    from apexrl import cli

    monkeypatch.setattr(ray, "__version__", "2.61.0")
    monkeypatch.delenv(ray_compat.UNTESTED, raising=False)
    assert cli.main(["train", "--run-dir", str(tmp_path / "run"), "--max-time", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("apexrl: error: Ray 2.61.0 is outside"), err
    assert not ray.is_initialized()


def test_a_changed_private_name_starts_rays_stock_processes_with_one_warning(user_shell, monkeypatch, caplog):
    _break(monkeypatch, "RayParams")  # its signature only: Ray's own start still works
    with caplog.at_level(logging.WARNING, logger="apexrl"):
        private_ray.start(num_cpus=1, dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        commands = [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)]
        assert not any("ray_agents.py" in c or "ray_worker.py" in c for c in commands), commands
        assert any("log_monitor.py" in c for c in commands), "Ray's own log monitor runs in a stock start"
        assert ray.get(ray.remote(lambda: 7).remote(), timeout=120) == 7
    finally:
        private_ray.stop()
    stock = [r for r in caplog.records if "stock start-up" in r.getMessage()]
    assert len(stock) == 1 and "RayParams" in stock[0].getMessage()


@pytest.mark.skipif(not lean_start.stand_ins_fit(), reason="this Ray's own agents run (no port files before 2.54)")
def test_a_stand_in_agent_that_never_writes_its_port_falls_back_to_the_stock_start_in_bounded_time(
        user_shell, monkeypatch, caplog, tmp_path):
    script = tmp_path / "agent.py"
    script.write_text("import time\ntime.sleep(3600)\n")
    original = lean_start.stand_in_agents

    def broken(command, ray_path):
        ours = str(Path(lean_start.__file__).with_name("ray_agents.py"))
        return [a.replace(ours, str(script)) for a in original(command, ray_path)]

    monkeypatch.setattr(lean_start, "stand_in_agents", broken)
    monkeypatch.setattr(lean_start, "REGISTER_S", 5.0)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="apexrl"):
        private_ray.start(num_cpus=1, dashboard=False, logging_level="ERROR", log_to_driver=False)
    took = time.monotonic() - t0
    try:
        commands = [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)]
        assert not any(str(script) in c for c in commands), "the broken agents were ended"
        assert ray.get(ray.remote(lambda: 7).remote(), timeout=120) == 7
    finally:
        private_ray.stop()
    failed = [r.getMessage() for r in caplog.records if "lean start-up failed" in r.getMessage()]
    assert len(failed) == 1, failed
    # The raylet may give up on its agents by itself (after ~15 s) before the wait for it runs out.
    assert "the raylet exited" in failed[0] or "did not register in 5 s" in failed[0]
    assert took < 25.0, f"{took:.0f} s: the lean start was not cut short (Ray's own wait is 30 s, then its start)"


class _AnswersAList:
    def __init__(self, address):
        pass

    def get_all_node_info(self, timeout=None):
        return [{"node_id": "x"}]


def test_a_gcs_client_that_answers_otherwise_is_said_once_not_waited_out(monkeypatch, caplog):
    import ray._raylet

    monkeypatch.setattr(ray._raylet, "GcsClient", _AnswersAList)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="apexrl"):
        assert lean_start.await_node("127.0.0.1:1", "ab" * 28, timeout_s=10) is None
    assert time.monotonic() - t0 < 1.0
    assert [r.getMessage() for r in caplog.records if "does not answer as apexrl expects" in r.getMessage()]


def test_a_missing_gcs_client_leaves_the_wait_to_ray(monkeypatch, caplog):
    import ray._raylet

    monkeypatch.delattr(ray._raylet, "GcsClient")
    with caplog.at_level(logging.WARNING, logger="apexrl"):
        assert lean_start.await_node("127.0.0.1:1", "ab" * 28, timeout_s=10) is None


def test_a_raylet_that_died_ends_the_wait_at_once(monkeypatch):
    import ray._raylet

    class Empty(_AnswersAList):
        def get_all_node_info(self, timeout=None):
            return {}

    monkeypatch.setattr(ray._raylet, "GcsClient", Empty)
    t0 = time.monotonic()
    assert lean_start.await_node("127.0.0.1:1", "ab" * 28, timeout_s=10, alive=lambda: False) is False
    assert time.monotonic() - t0 < 0.5


def test_retry_settings_this_ray_does_not_know_are_left_out(monkeypatch):
    import ray._raylet

    class Config:
        raylet_client_connect_timeout_milliseconds = staticmethod(lambda: 1000)

    monkeypatch.setattr(ray._raylet, "Config", Config)
    assert lean_start.quick_retries() == {"raylet_client_connect_timeout_milliseconds": 50}
    monkeypatch.delattr(ray._raylet, "Config")
    assert lean_start.quick_retries() == {}


def test_a_log_monitor_of_another_shape_keeps_rays_own(monkeypatch):
    from ray._private import log_monitor

    assert lean_start.log_publisher() is not None  # this Ray's: forwarded by the driver

    class Other:
        def __init__(self, logs_dir, publisher):
            pass

    monkeypatch.setattr(log_monitor, "LogMonitor", Other)
    assert lean_start.log_publisher() is None


def test_a_log_forwarder_that_cannot_start_costs_the_console_its_worker_output_not_the_run(user_shell, monkeypatch,
                                                                                            caplog):
    """As if Ray renamed ``_global_node`` or its GCS client: the run starts, and says where the output is."""
    from apexrl.runtime import ray_logs

    def renamed(node, publisher):
        raise AttributeError("module 'ray._private.worker' has no attribute '_global_node'")

    monkeypatch.setattr(ray_logs, "LogForwarder", renamed)
    with caplog.at_level(logging.WARNING, logger="apexrl"):
        private_ray.start(num_cpus=1, dashboard=False, logging_level="ERROR")
    try:
        assert ray.get(ray.remote(lambda: 7).remote(), timeout=120) == 7
    finally:
        private_ray.stop()
    lines = [r.getMessage() for r in caplog.records if "output is not shown here" in r.getMessage()]
    assert len(lines) == 1 and "_global_node" in lines[0]


def test_serializer_add_ons_fall_back_to_rays_own_registrations(monkeypatch):
    from ray.util import serialization_addons

    from apexrl.runtime.ray_worker import lean_serializers

    monkeypatch.delattr(serialization_addons, "apply")
    lean_serializers()()  # no apply to wrap: nothing changed, nothing raised
    assert not hasattr(serialization_addons, "apply")


WORKER_OUTPUT = """
import ray, time
from apexrl.runtime import private_ray
private_ray.start(num_cpus=1, dashboard=False, logging_level="ERROR")
@ray.remote
def speak():
    print("apexrl-worker-says-hello", flush=True)
ray.get(speak.remote())
time.sleep(2.0)
private_ray.stop()
"""


def test_worker_output_reaches_the_drivers_console(user_shell):
    out = subprocess.run([sys.executable, "-c", WORKER_OUTPUT], capture_output=True, text=True, timeout=180)
    assert "apexrl-worker-says-hello" in out.stdout + out.stderr, out.stderr[-2000:]


def test_a_ray_without_the_token_loader_is_a_ray_without_token_authentication(monkeypatch):
    import ray._raylet

    assert ray_compat.token_auth() is (ray_compat.version() >= (2, 52))
    monkeypatch.delattr(ray._raylet, "AuthenticationTokenLoader", raising=False)
    ray_compat.token_auth.cache_clear()
    try:
        assert ray_compat.token_auth() is False
    finally:
        ray_compat.token_auth.cache_clear()


def test_without_token_authentication_a_private_run_is_loopback_only_and_says_so(user_shell, monkeypatch, caplog,
                                                                                tmp_path):
    monkeypatch.setattr(ray_compat, "token_auth", lambda: False)
    monkeypatch.setenv("HOME", str(tmp_path))  # where a Ray that has tokens after all writes its default one
    with caplog.at_level(logging.WARNING, logger="apexrl"):
        private_ray.start(num_cpus=1, dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        assert private_ray._token_dir is None and "RAY_AUTH_TOKEN_PATH" not in os.environ
        assert ray.get(ray.remote(lambda: 7).remote(), timeout=120) == 7
        private_ray.check_loopback({p.pid for p in psutil.Process().children(recursive=True)})
    finally:
        private_ray.stop()
    lines = [r.getMessage() for r in caplog.records if "no token authentication" in r.getMessage()]
    assert len(lines) == 1 and "loopback only" in lines[0]


def test_a_ray_without_its_authentication_error_is_not_asked_about_tokens(monkeypatch, caplog):
    import ray.exceptions

    from apexrl.runtime import cluster

    monkeypatch.delattr(ray.exceptions, "AuthenticationError", raising=False)
    with caplog.at_level(logging.WARNING, logger="apexrl"):
        assert cluster._gcs_refuses("127.0.0.1:1") is False
    assert [r for r in caplog.records if "whether it wants a token" in r.getMessage()]


def test_an_older_ray_checks_a_cluster_without_asking_about_tokens(monkeypatch):
    from apexrl.runtime import cluster

    monkeypatch.setattr(ray_compat, "token_auth", lambda: False)
    monkeypatch.setattr(cluster, "_check_reachable", lambda address: "127.0.0.1:6379")
    monkeypatch.setattr(cluster, "_gcs_refuses", lambda target: pytest.fail("asked about tokens"))
    cluster.check_cluster("127.0.0.1:6379")


def test_a_head_that_answers_before_its_raylet_registered_is_waited_for(monkeypatch):
    """Ray 2.54-2.5x refuse a driver with an empty ConnectionError for the first second or so of a head."""
    from apexrl.runtime import cluster

    calls = []

    def init(address, **kw):
        calls.append(address)
        if len(calls) < 3:
            raise ConnectionError()

    monkeypatch.setattr(cluster, "check_cluster", lambda address: None)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    assert cluster.init_ray("127.0.0.1:6379", num_cpus=1) is True
    assert calls == ["127.0.0.1:6379"] * 3
    calls.clear()
    monkeypatch.setattr(cluster, "JOIN_WAIT_S", 0.0)
    with pytest.raises(cluster.ClusterError, match=r"cannot reach a Ray cluster at --address 127.0.0.1:6379"):
        cluster.init_ray("127.0.0.1:6379", num_cpus=1)


def test_a_listening_socket_beyond_loopback_is_refused_in_one_line():
    """Here this process's own socket stands in for a Ray process's."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        with pytest.raises(private_ray.NotLoopback, match=r"did not keep the private run on loopback \(python"):
            private_ray.check_loopback({os.getpid()})
    private_ray.check_loopback({os.getpid()})  # nothing beyond loopback now


@pytest.mark.skipif(sys.byteorder != "little", reason="the hand-written /proc/net lines are a little-endian host's")
def test_proc_net_addresses_read_as_the_kernel_writes_them():
    assert private_ray._proc_address("0100007F:1F90", socket.AF_INET) == ("127.0.0.1", 8080)
    assert private_ray._proc_address("00000000:07E8", socket.AF_INET) == ("0.0.0.0", 2024)
    assert private_ray._proc_address("00000000000000000000000001000000:0050", socket.AF_INET6) == ("::1", 80)
    assert private_ray._proc_address("0000000000000000FFFF00000100007F:0050", socket.AF_INET6) == ("127.0.0.1", 80)


@pytest.mark.parametrize("address", ["0.0.0.0", "::"])
def test_the_proc_net_check_and_psutils_agree(address):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((address, 0))
        s.listen()
        me = [psutil.Process()]
        port = s.getsockname()[1]
        assert any(f":{port}" in e for e in private_ray._exposed_linux(me))
        assert any(c.laddr.port == port for c in me[0].net_connections(kind="inet") if c.status == psutil.CONN_LISTEN)


def test_a_ray_that_ignores_the_loopback_setting_is_refused_and_undone(user_shell, monkeypatch, tmp_path):
    """As if Ray renamed its loopback switch: the private Ray comes up listening everywhere. It is shut down
    and refused in one line; nothing it started is left."""
    import ray._private.ray_constants as ray_constants

    from apexrl.runtime.cluster import ClusterError, init_ray

    monkeypatch.setattr(private_ray, "_loopback_only", lambda: None)
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    monkeypatch.setattr(private_ray, "_init", lambda kwargs: ray.init(address="local", **kwargs))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(ClusterError, match="did not keep the private run on loopback") as err:
        init_ray(None, num_cpus=1)
    assert "\n" not in str(err.value)
    assert not ray.is_initialized()
    assert _left(before) == []
    assert "RAY_AUTH_TOKEN_PATH" not in os.environ and "RAY_AUTH_MODE" not in os.environ


def test_a_users_own_socket_beyond_loopback_does_not_refuse_the_private_run(user_shell):
    """A notebook or web app that calls apexrl may listen on every address itself; only Ray's are checked."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        private_ray.start(num_cpus=1, dashboard=False, logging_level="ERROR", log_to_driver=False)
        try:
            assert ray.get(ray.remote(lambda: 7).remote(), timeout=120) == 7
        finally:
            private_ray.stop()


def test_a_failed_start_undoes_itself(user_shell, monkeypatch):
    """ray.init raising after Ray's processes started: watchdog, token, environment and processes all go."""
    real_init = ray.init

    def init_then_fail(*a, **kw):
        real_init(*a, **kw)
        raise RuntimeError("simulated: ray.init failed after starting the node")

    monkeypatch.setattr(ray, "init", init_then_fail)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    env = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    tokens = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("apexrl-ray-*"))
    with pytest.raises(RuntimeError, match="simulated"):
        private_ray.start(num_cpus=1, dashboard=False, logging_level="ERROR", log_to_driver=False)
    assert not ray.is_initialized()
    assert _left(before) == [], "the watchdog and Ray's processes are gone"
    assert {k: os.environ.get(k) for k in env} == env
    assert set(Path(os.environ.get("TMPDIR", "/tmp")).glob("apexrl-ray-*")) == tokens, "the token folder is gone"


def _left(before: set[int], wait_s: float = 15.0) -> list[str]:
    deadline = time.monotonic() + wait_s
    while True:
        left = []
        for p in psutil.Process().children(recursive=True):
            try:
                if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE:
                    left.append(" ".join(p.cmdline())[:120])
            except psutil.Error:
                pass
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.3)
