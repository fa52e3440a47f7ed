"""The stand-ins for the raylet's agents speak the raylet's protocol: ports left where Ray's own agents
leave them, requests and replies in the protobuf messages Ray defines, and a private Ray comes up with
them, serves ``env_vars`` runtime envs and refuses other kinds in one line; its workers stay lean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
import ray
from ray.core.generated import runtime_env_agent_pb2 as pb

from apexrl.runtime import lean_start, private_ray, ray_agents
from apexrl.runtime.ray_worker import LIGHT, LIGHT_ENV

if not lean_start.stand_ins_fit():
    pytest.skip(f"Ray {ray.__version__}'s agents take ports from the driver (before 2.54); Ray's own agents run",
                allow_module_level=True)
from ray._raylet import persist_port as ray_persist_port  # noqa: E402

pytestmark = pytest.mark.compat

NODE = "ab" * 28


def test_ports_are_left_as_rays_own_agents_leave_them(tmp_path):
    ray_dir, ours = tmp_path / "ray", tmp_path / "ours"
    ray_dir.mkdir(), ours.mkdir()
    for name, port in (("metrics_agent_port", -1), ("runtime_env_agent_port", 40123)):
        ray_persist_port(str(ray_dir), NODE, name, port)
        ray_agents.persist_port(str(ours), NODE, name, port)
    assert sorted(os.listdir(ours)) == sorted(os.listdir(ray_dir))
    for f in os.listdir(ray_dir):
        assert (ours / f).read_text() == (ray_dir / f).read_text()


def test_the_request_field_is_read_from_rays_own_message():
    env = json.dumps({"env_vars": {"A": "1"}})
    request = pb.GetOrCreateRuntimeEnvRequest(serialized_runtime_env=env, job_id=b"\x01\x00\x00\x00",
                                              source_process="raylet")
    request.runtime_env_config.setup_timeout_seconds = 600
    assert ray_agents.string_field(request.SerializeToString(), 1) == env
    assert ray_agents.string_field(request.SerializeToString(), 4) == "raylet"
    assert ray_agents.string_field(pb.GetOrCreateRuntimeEnvRequest().SerializeToString(), 1) == ""


def test_an_env_vars_runtime_env_is_created_with_its_variables():
    raw = ray_agents.create_runtime_env(json.dumps({"env_vars": {"A": "1"}, "_ray_commit": "abc"}), "/py")
    reply = pb.GetOrCreateRuntimeEnvReply.FromString(raw)
    assert reply.status == pb.AGENT_RPC_STATUS_OK and reply.error_message == ""
    from ray._private.runtime_env.context import RuntimeEnvContext

    context = RuntimeEnvContext.deserialize(reply.serialized_runtime_env_context)
    assert context.env_vars == {"A": "1"} and context.py_executable == "/py" and context.command_prefix == []


def test_other_runtime_envs_are_refused_naming_what_was_asked():
    raw = ray_agents.create_runtime_env(json.dumps({"pip": ["x"], "working_dir": ".", "env_vars": {}}), "/py")
    reply = pb.GetOrCreateRuntimeEnvReply.FromString(raw)
    assert reply.status == pb.AGENT_RPC_STATUS_FAILED
    assert "not pip, working_dir;" in reply.error_message and "ray start" in reply.error_message
    assert "\n" not in reply.error_message


def test_the_delete_reply_is_rays_ok():
    assert pb.DeleteRuntimeEnvIfPossibleReply.FromString(ray_agents.reply(0)).status == pb.AGENT_RPC_STATUS_OK


def test_the_raylet_command_gets_the_stand_ins_with_rays_arguments():
    ray_path = "/site/ray"
    dash = f"/bin/py -u {ray_path}/dashboard/agent.py --node-id=N --session-dir=/s"
    renv = f"/bin/py -u {ray_path}/_private/runtime_env/agent/main.py --node-id=N --session-dir=/s"
    out = lean_start.stand_in_agents(["raylet", "--head", f"--dashboard_agent_command={dash}",
                                       f"--runtime_env_agent_command={renv}"], ray_path)
    ours = str(Path(ray_agents.__file__))
    assert out[:2] == ["raylet", "--head"]
    assert out[2] == f"--dashboard_agent_command=/bin/py -u {ours} dashboard --node-id=N --session-dir=/s"
    assert out[3] == f"--runtime_env_agent_command=/bin/py -u {ours} runtime-env --node-id=N --session-dir=/s"
    # Another Ray's commands (agents elsewhere) are left as they are.
    assert lean_start.stand_in_agents([f"--dashboard_agent_command={dash}"], "/other") == \
        [f"--dashboard_agent_command={dash}"]


@ray.remote(**LIGHT)
class _Light:
    def env(self) -> str | None:
        return os.environ.get(LIGHT_ENV)


@ray.remote
def _modules(x: object) -> list[str]:
    import sys

    return [m for m in ("pyarrow", "pydantic", "aiohttp", "torch") if m in sys.modules]


@ray.remote(runtime_env={"pip": ["nothing-to-install"]})
def _needs_pip() -> int:
    return 1


def _agents() -> dict[str, psutil.Process]:
    found = {}
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if any(c.endswith("ray_agents.py") for c in cmd):
            found[cmd[cmd.index(next(c for c in cmd if c.endswith("ray_agents.py"))) + 1]] = p
        elif any(c.endswith(("dashboard/agent.py", "runtime_env/agent/main.py")) for c in cmd):
            found["ray's own"] = p
    return found


def test_a_private_ray_runs_with_the_stand_ins(monkeypatch):
    for k in list(os.environ):
        if k.startswith("RAY_"):
            monkeypatch.delenv(k)
    private_ray.start(num_cpus=1, dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        agents = _agents()
        assert set(agents) == {"dashboard", "runtime-env"}, agents
        assert ray.get(_Light.remote().env.remote(), timeout=120) == "1"
        # A worker that got and returned objects loaded none of Ray's add-on or dashboard modules.
        assert ray.get(_modules.remote(ray.put({"a": [1, 2]})), timeout=120) == []
        with pytest.raises(ray.exceptions.RuntimeEnvSetupError, match="only env_vars runtime envs, not pip"):
            ray.get(_needs_pip.remote(), timeout=120)
        port = next(c.laddr.port for c in agents["runtime-env"].net_connections(kind="inet")
                    if c.status == psutil.CONN_LISTEN)
        stranger = urllib.request.Request(f"http://127.0.0.1:{port}/get_or_create_runtime_env", data=b"",
                                          method="POST")
        with pytest.raises(urllib.error.HTTPError, match="401"):
            urllib.request.urlopen(stranger, timeout=10)
    finally:
        private_ray.stop()
    for p in agents.values():
        try:
            p.wait(timeout=10)
        except psutil.NoSuchProcess:
            pass
        assert not p.is_running()


def test_with_the_dashboard_rays_own_agents_run():
    code = ("import psutil, ray\nfrom apexrl.runtime import private_ray\n"
            "private_ray.start(num_cpus=1, dashboard=True, logging_level='ERROR', log_to_driver=False)\n"
            "cmds = [' '.join(p.cmdline()) for p in psutil.Process().children(recursive=True)]\n"
            "print('OURS' if any('ray_agents.py' in c for c in cmds) else '',"
            " 'RAYS' if any('dashboard/agent.py' in c for c in cmds) else '')\n"
            "private_ray.stop()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert out.stdout.split() == ["RAYS"], out.stdout + out.stderr[-2000:]


def test_quick_retries_keep_rays_ten_seconds_in_smaller_steps():
    from ray._raylet import Config

    retries = lean_start.quick_retries()
    assert retries == {"raylet_client_connect_timeout_milliseconds": 50, "raylet_client_num_connect_attempts": 200}
    assert 50 * 200 == Config.raylet_client_connect_timeout_milliseconds() * Config.raylet_client_num_connect_attempts()
