"""What a small run costs besides training: ``apexrl train`` as a user runs it starts only the processes it
uses, keeps torch out of every process but the learner's, still shows what workers print, reports its start-up
and peak memory, and leaves nothing running once it returns."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil
import ray

from apexrl.bench.overhead import user_env
from apexrl.runtime.footprint import Startup, by_role, process_start, role_of, tree_pss

NOISY_ENV = '''
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class NoisyCartPole(CartPoleEnv):
    def reset(self, **kw):
        print("HELLO FROM THE ENV", flush=True)
        return super().reset(**kw)
'''


def _has_torch(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as f:
        return "libtorch_cpu" in f.read()


def test_a_cartpole_run_starts_only_what_it_uses_and_leaves_nothing_behind(tmp_path):
    (tmp_path / "noisy_env.py").write_text(NOISY_ENV)
    run, log = tmp_path / "run", tmp_path / "out.txt"
    with log.open("w") as f:  # a file, not a pipe: nobody reads a pipe while we watch, and a full one blocks
        # Long enough for every role to come up and the learner to train: at ~3,000 env steps a run on a fast
        # start could be over before the shard's new worker process had become the shard.
        proc = subprocess.Popen([sys.executable, "-m", "apexrl", "train", "--max-env-steps", "15000", "--console",
                                 "plain", "--set", "env.id=noisy_env.NoisyCartPole", "--run-dir", str(run)],
                                env={**user_env(), "PYTHONPATH": str(tmp_path)}, cwd=tmp_path, stdout=f, stderr=subprocess.STDOUT)
    root = psutil.Process(proc.pid)
    seen: dict[int, tuple[str, float]] = {}
    roles: set[str] = set()  # every role a process was seen in: a worker is retitled when its actor ends
    torch_in: dict[str, bool] = {}
    try:
        while proc.poll() is None:
            try:
                kids = root.children(recursive=True)
            except psutil.NoSuchProcess:
                break
            try:
                torch_in["driver"] = torch_in.get("driver", False) or _has_torch(proc.pid)
            except OSError:
                pass
            for p in kids:
                try:
                    role = role_of(p.cmdline())
                    seen[p.pid] = (role, p.create_time())
                    roles.add(role)
                    if role in ("actor", "learner", "replay shard", "parameter server"):
                        torch_in[role] = torch_in.get(role, False) or _has_torch(p.pid)
                except (psutil.Error, OSError):
                    pass
            time.sleep(0.2)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = log.read_text()
    assert proc.returncode == 0, out

    assert {"actor", "learner", "replay shard", "parameter server", "Ray GCS", "Ray raylet"} <= roles, roles
    assert not roles & {"Ray dashboard head", "Ray autoscaler monitor", "Ray log monitor"}, roles
    # Only the learner trains a torch network; CartPole's actor and the driver's evaluations act with its MLP
    # in numpy, TensorBoard files and checkpoints are written without it.
    assert torch_in == {"driver": False, "actor": False, "learner": True, "replay shard": False,
                        "parameter server": False}

    # What the env printed in the actor's process reaches the console, as Ray's log monitor would show it.
    assert any("ActorWorker" in line and "HELLO FROM THE ENV" in line for line in out.splitlines()), out
    start = next(line for line in out.splitlines() if line.startswith("start-up: first env step"))
    done = next(line for line in out.splitlines() if line.startswith("done:"))
    assert "peak memory" in done and "start-up" in done, done
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert 0 < last["startup_s"] < 120 and f"{last['startup_s']:.1f} s" in start
    assert 100 < last["peak_memory_mb"] < 20_000
    assert list((run / "checkpoints").glob("ckpt-*.pt"))

    time.sleep(1.0)  # Ray was shut down before the command returned; allow the last exits to be reaped
    alive = []
    for pid, (role, created) in seen.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(role)
        except psutil.NoSuchProcess:
            pass
    assert not alive, f"still running after the command returned: {alive}"


def test_roles_are_named_from_command_lines():
    assert role_of(["ray::ActorWorker.run"]) == "actor"
    assert role_of(["ray::ReplayShardWorker"]) == "replay shard"
    assert role_of(["/venv/bin/python", "/venv/lib/ray/dashboard/dashboard.py", "--host=127.0.0.1"]) == \
        "Ray dashboard head"
    assert role_of(["/venv/lib/ray/core/src/ray/raylet/raylet", "--raylet_socket_name=x"]) == "Ray raylet"
    assert role_of(["/venv/bin/python", "-u", "/src/apexrl/runtime/ray_agents.py", "dashboard", "--node-id=N",
                    "--raylet-name=/tmp/ray/session/sockets/raylet"]) == "Ray dashboard agent, stand-in"
    assert role_of(["/venv/lib/ray/raylet", "--raylet_socket_name=x",
                    "--dashboard_agent_command=/venv/bin/python -u /src/apexrl/runtime/ray_agents.py dashboard"]) \
        == "Ray raylet"
    assert role_of(["ray::SomethingElse"]) == "other Ray worker"
    assert role_of(["python", "train.py"]) == "other"
    assert role_of(["python", "train.py"], root=True) == "driver"


def test_memory_by_role_sums_processes_of_one_role():
    assert by_role([("actor", 100), ("learner", 300), ("actor", 150)]) == {"learner": (1, 300), "actor": (2, 250)}


def test_a_process_tree_counts_its_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; x = b\"\\x01\" * (50 * 2**20); time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            procs = tree_pss(psutil.Process().pid)
            mine = [b for r, b in procs if r == "other"]
            if mine and max(mine) > 50 * 2**20:
                break
            time.sleep(0.1)
        assert procs[0][0] == "driver"
        assert max(mine) > 50 * 2**20  # the child's 50 MB buffer, counted once
    finally:
        child.kill()
        child.wait()


def test_start_up_parts_are_the_time_between_marks_in_order():
    s = Startup(process=100.0)
    s.mark("Ray", 103.0)
    s.mark("imports", 101.5)
    s.mark("Ray", 999.0)  # a mark is set once
    assert s.parts() == [("imports", 1.5), ("Ray", 1.5)]
    assert s.since_start("Ray") == 3.0 and s.since_start("workers") is None


def test_process_start_is_when_the_command_ran():
    t0 = time.time()
    out = subprocess.run([sys.executable, "-c", "from apexrl.runtime.footprint import process_start; "
                          "print(process_start())"], capture_output=True, text=True, check=True).stdout
    assert t0 - 0.05 <= float(out) <= t0 + 1.0  # 10 ms ticks; before the interpreter and imports ran
    assert abs(process_start() - psutil.Process().create_time()) < 1.5


def test_a_command_a_shell_execs_after_waiting_counts_from_its_own_start_not_the_shells():
    """``bash -c 'pip install … && apexrl train'``: bash waits, then execs apexrl in its own process."""
    code = ("from apexrl.runtime.footprint import command_start, process_start; import time; "
            "print(time.time() - process_start(), time.time() - command_start())")
    out = subprocess.run(["bash", "-c", f"sleep 3 && exec {sys.executable} -c '{code}'"], capture_output=True,
                         text=True, check=True).stdout.split()
    since_process, since_command = float(out[0]), float(out[1])
    assert since_process >= 3.0  # the process is the shell's, started before the wait
    assert since_command < 2.5  # Python and the import of apexrl, plus 1 s of slack


def test_a_command_started_directly_counts_from_its_process_start():
    t0 = time.time()
    out = subprocess.run([sys.executable, "-c", "from apexrl.runtime.footprint import command_start; "
                          "print(command_start())"], capture_output=True, text=True, check=True).stdout
    assert t0 - 0.05 <= float(out) <= t0 + 1.0


def test_an_env_id_that_names_nothing_is_one_line_and_leaves_no_ray_and_no_run_dir(capsys, tmp_path):
    from apexrl import cli

    # Looked up while Ray starts (start-up), so Ray has started: the command ends it before it returns.
    code = cli.main(["train", "--set", "env.id=NoSuchEnv-v9", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "unknown env 'NoSuchEnv-v9'" in err[0], err
    assert not (tmp_path / "run").exists()
    assert not ray.is_initialized()
    raylets = [p for p in psutil.Process().children(recursive=True) if p.name() == "raylet" and p.is_running()
               and p.status() != psutil.STATUS_ZOMBIE]
    assert not raylets, raylets
