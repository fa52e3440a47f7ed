"""Stand-ins for the two per-node agents a raylet starts, for a private run that uses neither.

Ray's raylet starts a dashboard agent (metrics export, job submission, log and state APIs: ~86 MB and
~1 s of CPU at start-up) and a runtime-env agent (pip, conda, working_dir, env_vars: ~50 MB), and will not
come up until each has written its ports into the session directory. A private apexrl run exports no
metrics, submits no jobs and asks only for ``env_vars`` runtime envs (``ray_worker.LIGHT``), so here they
are a small stdlib process each (``lean_start.lean_node`` puts this script in the raylet's agent
commands, keeping Ray's arguments):

- ``dashboard``: writes -1 for its three ports, as Ray's own agent does in a minimal install where those
  services are not in use, and waits for the raylet to end;
- ``runtime-env``: serves the raylet's three HTTP calls on loopback with this run's token, creating
  ``env_vars``-only runtime envs and refusing any other kind with one line that says what to do.

Run by the raylet as ``python ray_agents.py dashboard|runtime-env <Ray's agent arguments>``.
"""

from __future__ import annotations

import json
import os
import sys
import time

_DASHBOARD_PORTS = ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port")
_RUNTIME_ENV_PORT = "runtime_env_agent_port"
_OK, _FAILED = 0, 1  # AgentRpcStatus


def persist_port(session_dir: str, node_id: str, name: str, port: int) -> None:
    """Where and how ``ray._raylet.persist_port`` leaves a port for the raylet (checked against it in tests)."""
    path = os.path.join(session_dir, f"{name}_{node_id}")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, path)


# ---------------------------------------------------------------- protobuf wire format, the fields we use
def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7


def string_field(data: bytes, number: int) -> str:
    """Field ``number`` of a serialized message when it is a string; '' when absent. Other fields skipped."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        wire = key & 7
        if wire == 0:
            _, i = _varint(data, i)
        elif wire == 2:
            n, i = _varint(data, i)
            if key >> 3 == number:
                return data[i:i + n].decode()
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"protobuf wire type {wire} not expected")
    return ""


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b, value = value & 0x7F, value >> 7
        out.append(b | (0x80 if value else 0))
        if not value:
            return bytes(out)


def reply(status: int, error: str = "", context: str = "") -> bytes:
    """A ``GetOrCreateRuntimeEnvReply`` (status 1, error_message 2, context 3); its first two fields are
    also a ``DeleteRuntimeEnvIfPossibleReply``."""
    out = bytearray()
    if status:
        out += b"\x08" + _encode_varint(status)
    for number, text in ((2, error), (3, context)):
        if text:
            raw = text.encode()
            out += _encode_varint(number << 3 | 2) + _encode_varint(len(raw)) + raw
    return bytes(out)


def create_runtime_env(serialized: str, python: str) -> bytes:
    """The reply to a ``get_or_create_runtime_env`` whose ``serialized_runtime_env`` is ``serialized``."""
    env = json.loads(serialized or "{}")
    unsupported = sorted(k for k, v in env.items()  # "_ray_commit" and such: Ray's own bookkeeping
                         if k != "env_vars" and not k.startswith("_") and v not in (None, {}, [], ""))
    if unsupported:
        return reply(_FAILED, error=f"a private apexrl Ray creates only env_vars runtime envs, not "
                                    f"{', '.join(unsupported)}; start Ray yourself (ray start) and pass "
                                    f"--address for these")
    context = {"command_prefix": [], "env_vars": dict(env.get("env_vars") or {}), "py_executable": python,
               "override_worker_entrypoint": None, "java_jars": []}
    return reply(_OK, context=json.dumps(context))


def _token() -> str | None:
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if os.environ.get("RAY_AUTH_MODE") != "token" or not path:
        return None
    with open(path) as f:
        return f.read().strip()


def serve_runtime_envs(host: str, port: int) -> int:
    """Starts the runtime-env agent's HTTP server in a thread; returns its port. (The dashboard stand-in
    never imports http.server: ~10 MB.)"""
    import hmac
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    token = _token()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if token is not None and not hmac.compare_digest(self.headers.get("Authorization", ""),
                                                             f"Bearer {token}"):
                self._send(401, b"")
            elif self.path == "/get_or_create_runtime_env":
                self._send(200, create_runtime_env(string_field(body, 1), sys.executable))
            elif self.path in ("/delete_runtime_env_if_possible", "/get_runtime_envs_info"):
                self._send(200, b"")  # OK, and no runtime envs to report
            else:
                self._send(404, b"")

        def _send(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def _args(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)


def _wait_for_parent() -> None:
    """Ray's agents end with their raylet; so do these."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)


def main(argv: list[str]) -> None:
    role, args = argv[0], _args(argv[1:])
    session_dir, node_id = args["session-dir"], args["node-id"]
    if role == "dashboard":
        for name in _DASHBOARD_PORTS:
            persist_port(session_dir, node_id, name, -1)
    elif role == "runtime-env":
        port = serve_runtime_envs(args.get("node-ip-address", "127.0.0.1"),
                                  int(args.get("runtime-env-agent-port") or 0))
        persist_port(session_dir, node_id, _RUNTIME_ENV_PORT, port)
    else:
        raise SystemExit(f"ray_agents.py: unknown agent {role!r}")
    _wait_for_parent()


if __name__ == "__main__":
    main(sys.argv[1:])
