"""Ape-X on a multi-node Ray cluster, simulated on this host with ``ray.cluster_utils.Cluster``, and
the deployment files in deploy/ (they parse, and what they run exists in the project).

Layout of the module's cluster (logical resources; the OS shares the real cores)::

    head   CPU 1                the test process (the Ape-X driver) connects here
    gpu    CPU 2, GPU 1 (fake)  learner.num_gpus=1 pins the learner here; learner.device stays cpu
    cpu    CPU 4                room for every actor: only SPREAD puts actors on all three nodes

The node-loss test adds a node, lets a waiting actor start there, removes the node mid-run and checks
that the driver restarts the lost actor on a node added afterwards while training goes on. Shards and
the learner exist before that node joins, so they cannot be on it (losing them is not survivable yet).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ray
import yaml
from ray.cluster_utils import Cluster

from apexrl import config as C
from apexrl.metrics import Console
from apexrl.runtime import driver

NODE = {"node_ip_address": "127.0.0.1", "object_store_memory": 100 * 1024 * 1024}
TINY = ["actors.envs_per_actor=2", "replay.capacity=20000", "replay.learning_starts=200",
        "replay.samples_per_insert=null", "network.torso=[32]", "network.head=32", "learner.batch_size=32",
        "evaluation.interval_s=0", "logging.report_interval_s=1", "logging.tensorboard=false",
        "checkpoint.every_reports=0"]
JOIN_S = 180  # generous: a node takes ~10 s to join on a loaded 2-core host


def add_node(cluster: Cluster, **kwargs: Any) -> Any:
    node = cluster.add_node(wait=False, **NODE, **kwargs)
    cluster.wait_for_nodes(timeout=JOIN_S)
    return node


@pytest.fixture(scope="module")
def cluster():
    """Several nodes on one host must all bind loopback: Ray's switch for it, for this fixture only."""
    import ray._private.ray_constants as ray_constants

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        mp.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
        yield from _cluster()


def _cluster():
    c = Cluster(initialize_head=True, head_node_args={**NODE, "num_cpus": 1, "include_dashboard": False})
    try:
        nodes = {"head": c.head_node, "gpu": add_node(c, num_cpus=2, num_gpus=1), "cpu": add_node(c, num_cpus=4)}
        ray.init(address=c.address, logging_level="WARNING")
        yield c, nodes
    finally:
        ray.shutdown()
        c.shutdown()


def node_of(handle: Any) -> str:
    """Ask a Ray actor which node it runs on (queued behind its current task)."""
    return ray.get(handle.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()))


class HookConsole(Console):
    """A silent console that hands every report record to ``hook`` inside the driver loop."""

    def __init__(self, hook: Callable[[dict[str, Any]], None]) -> None:
        super().__init__("off")
        self.hook, self.records = hook, []

    def update(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        self.hook(record)


@pytest.mark.cluster
@pytest.mark.slow
def test_spread_placement_and_gpu_pinned_learner(cluster, topologies, tmp_path):
    c, nodes = cluster
    cfg = C.load("cartpole", TINY + ["actors.num_actors=3", "actors.placement=spread", "replay.num_shards=2",
                                     "learner.num_gpus=1", "learner.device=cpu", "stop.max_env_steps=3000"])
    seen: dict[str, Any] = {}

    def hook(rec: dict[str, Any]) -> None:
        if not seen and rec["env_steps"] > 0:
            topo = topologies[0]
            seen.update(actors=[node_of(a) for a in topo.actors], shards=[node_of(s) for s in topo.shards],
                        learner=node_of(topo.learner))

    result = driver.train(cfg, run_dir=tmp_path / "run", address=c.address, console=HookConsole(hook))
    assert result.env_steps >= 3000 and result.learner_updates > 0
    assert seen["learner"] == nodes["gpu"].node_id  # the only node with a GPU
    # One actor per node although the cpu node could take all three; the two shards on two nodes.
    assert sorted(seen["actors"]) == sorted(n.node_id for n in nodes.values()), seen
    assert len(set(seen["shards"])) == 2, seen
    print("placement:", seen)


@pytest.mark.cluster
@pytest.mark.slow
def test_training_survives_losing_a_worker_node(cluster, topologies, tmp_path):
    """3 actors of 2 CPUs: only the cpu node fits them (two), the third waits until node ``extra`` joins;
    ``extra`` is removed mid-run, the driver restarts that actor, it starts on node ``spare`` (added
    afterwards), and training goes on."""
    c, nodes = cluster
    cfg = C.load("cartpole", TINY + ["actors.num_actors=3", "actors.num_cpus=2", "actors.placement=spread",
                                     "learner.num_gpus=1",
                                     "stop.max_env_steps=100000000"])  # stopped by the hook (a Ctrl-C)
    st: dict[str, Any] = {"phase": "start"}

    def hook(rec: dict[str, Any]) -> None:
        topo = topologies[0]
        if st["phase"] == "start" and rec["env_steps"] > 0:
            st["core"] = {node_of(s) for s in topo.shards} | {node_of(topo.learner), node_of(topo.ps)}
            st["extra"] = add_node(c, num_cpus=2)
            where = [node_of(a) for a in topo.actors]  # the waiting actor answers once it is placed
            st["lost"] = [i for i, n in enumerate(where) if n == st["extra"].node_id]
            st["phase"] = "placed"
        elif st["phase"] == "placed" and rec["env_steps"] > 0:
            st["handles"] = list(topo.actors)
            c.remove_node(st["extra"])
            st["at_removal"] = dict(rec)
            st["phase"] = "removed"
        elif st["phase"] == "removed" and rec["actor_restarts"] >= len(st["lost"]):
            st["spare"] = add_node(c, num_cpus=2)
            st["restarted_on"] = [node_of(topo.actors[i]) for i in st["lost"]]
            st["restarted_new"] = all(topo.actors[i] is not st["handles"][i] for i in st["lost"])
            st["phase"] = "restarted"
        elif st["phase"] == "restarted" and rec["env_steps"] > st["at_removal"]["env_steps"] + 2000:
            st["phase"] = "stopped"  # once: the driver's final report calls this hook again
            raise KeyboardInterrupt  # the driver's Ctrl-C path: stop, drain, checkpoint

    console = HookConsole(hook)
    result = driver.train(cfg, run_dir=tmp_path / "run", address=c.address, console=console)
    assert st["phase"] == "stopped", st
    assert st["lost"], "no actor was placed on the added node"
    assert st["extra"].node_id not in st["core"]
    assert st["restarted_new"] and st["restarted_on"] == [st["spare"].node_id] * len(st["lost"])
    assert result.stop_reason == "interrupted"
    after = st["at_removal"]
    assert result.env_steps > after["env_steps"] + 2000
    assert result.learner_updates > after["learner_updates"]
    assert console.records[-1]["actor_restarts"] >= len(st["lost"])


@pytest.mark.cluster
@pytest.mark.slow
def test_cli_train_joins_cluster(cluster, tmp_path):
    c, _ = cluster
    run = tmp_path / "cli-run"
    cmd = [sys.executable, "-m", "apexrl.cli", "train", "--address", c.address, "--run-dir", str(run),
           "--max-env-steps", "1000", "--console", "plain", "--set", "actors.num_actors=2",
           "--set", "actors.placement=spread"] + [a for kv in TINY for a in ("--set", kv)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=540)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "done: reached 1,000 env steps" in proc.stdout
    assert (run / "metrics.jsonl").read_text().strip()


# -- deploy/: parse, and every command and file they name exists ---------------------------------------

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def _apexrl_commands(text: str) -> list[str]:
    """``apexrl ...`` invocations in shell text, each cut at the end of its simple command."""
    out = []
    for m in re.finditer(r"(?:^|[\s/'\"(])apexrl\s+((?:train|eval|bench|runs|tune|plot|--|-h|[a-z]+\b(?= --))"
                         r"[^&;|>'\"\n)]*)", text):
        out.append(m.group(1).strip())
    return out


def _check_apexrl_command(args: str, where: str) -> None:
    from apexrl.cli import build_parser

    argv = shlex.split(args)
    assert argv, f"{where}: bare 'apexrl'"
    try:
        ns = build_parser().parse_args(argv)
    except SystemExit as e:
        assert e.code == 0, f"{where}: 'apexrl {args}' does not parse"  # --help exits 0
        return
    config = getattr(ns, "config", None)
    if config and config.startswith("~/apexrl/"):
        assert (ROOT / config[len("~/apexrl/"):]).is_file(), f"{where}: {config} is not in the repo"


def test_aws_yaml_is_a_ray_cluster_config():
    cfg = yaml.safe_load((DEPLOY / "aws.yaml").read_text())
    schema = Path(ray.__file__).parent / "autoscaler" / "ray-schema.json"
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(cfg, json.loads(schema.read_text()))
    assert cfg["provider"]["type"] == "aws" and cfg["head_node_type"] in cfg["available_node_types"]
    head = " ".join(cfg["head_start_ray_commands"])
    assert "ray start --head --port=6379" in head and "--dashboard-host=0.0.0.0" not in head
    assert any("ray start --address=$RAY_HEAD_IP:6379" in c for c in cfg["worker_start_ray_commands"])
    for remote, local in cfg["file_mounts"].items():
        assert (ROOT / local).exists(), f"file_mounts {remote}: {local} missing"
    commands = [c for k, v in cfg.items() if k.endswith("_commands") for c in v]
    header = [line.lstrip("# ") for line in (DEPLOY / "aws.yaml").read_text().splitlines() if line.startswith("#")]
    found = [a for text in commands + header for a in _apexrl_commands(text)]
    assert any(a.startswith("train --address auto") for a in found), found
    for a in found:
        _check_apexrl_command(a, "aws.yaml")


def test_packer_json_builds_the_image():
    pk = json.loads((DEPLOY / "packer.json").read_text())
    var = pk["variables"]
    assert var["torch_version"] == "2.13.0" and var["torch_variant"] == "cpu"
    assert pk["builders"][0]["type"] == "amazon-ebs"
    sources = [s for p in pk["provisioners"] if p["type"] == "file" for s in p.get("sources", [p.get("source")])]
    assert sources
    for s in sources:
        assert (DEPLOY / s.replace("{{template_dir}}/", "")).resolve().exists(), f"packer file source {s} missing"
    inline = "\n".join(c for p in pk["provisioners"] if p["type"] == "shell" for c in p["inline"])
    assert "torch=={{user `torch_version`}}" in inline
    found = _apexrl_commands(inline)
    assert any(a.startswith("train ") for a in found), found  # the image is smoke-tested
    for a in found:
        _check_apexrl_command(a, "packer.json")


def test_dockerfile_copies_and_runs_what_exists():
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^ARG TORCH_VERSION=2\.13\.0$", text, re.MULTILINE)
    copies = re.findall(r"^COPY\s+(.+)$", text, re.MULTILINE)
    assert copies
    for line in copies:
        for src in line.split()[:-1]:
            assert (ROOT / src).exists(), f"Dockerfile COPY {src} missing"
    for a in _apexrl_commands(text.replace("\\\n", " ")):
        _check_apexrl_command(a, "Dockerfile")
    cmd = json.loads(re.search(r"^CMD\s+(.+)$", text, re.MULTILINE).group(1))
    _check_apexrl_command(" ".join(cmd[1:]), "Dockerfile CMD")


def test_docs_cluster_commands_exist():
    text = (ROOT / "docs" / "cluster.md").read_text()
    blocks = "\n".join(re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.DOTALL)).replace("\\\n", " ")
    found = _apexrl_commands(blocks)
    assert any(a.startswith("train --address auto") for a in found)
    for a in found:
        _check_apexrl_command(a, "docs/cluster.md")
