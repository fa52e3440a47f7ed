"""The shape of the codebase, as the docs promise it: one source of defaults, an agent-free runtime,
small modules, benchmarks that run from an installed package."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apexrl import config as C

PKG = Path(C.__file__).resolve().parent.parent


def test_the_dataclass_defaults_are_the_cartpole_preset_that_apexrl_train_runs():
    assert C.Config() == C.load("cartpole")
    assert C.from_dict({"env": {"id": "CartPole-v1"}}) == C.Config()  # apexrl.train({...}) runs these settings


def test_old_network_key_still_works_and_says_what_to_use(caplog):
    cfg = C.Config().replace(**{"network.hidden_sizes": [128, 128, 32]})
    assert cfg.network.torso == (128, 128) and cfg.network.head == 32
    assert "network.torso=[128, 128] and network.head=32" in caplog.text


def _imports(path: Path, module_level: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in (tree.body if module_level else ast.walk(tree)):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_the_runtime_imports_no_agent_package_and_speaks_of_no_algorithm():
    for path in sorted((PKG / "runtime").glob("*.py")):
        agent_pkgs = {m for m in _imports(path) if m.startswith("apexrl.agents.") and m != "apexrl.agents.base"}
        assert not agent_pkgs, f"{path.name} imports {agent_pkgs}"
        text = path.read_text().lower()
        for word in ("epsilon", "q-value", "q_value", "double dqn", "dqn"):
            assert word not in text, f"{path.name} speaks of {word!r}"


def test_the_config_sits_below_agents_and_runtime_and_its_layers_import_only_downwards():
    """At import time; Config.replace reads RLlib keys through the parser when it is called."""
    layers = ["schema", "agent_defaults", "policies", "validate", "rllib_base", "rllib_r2d2", "rllib_heads", "rllib_multiagent", "rllib_keys",
              "rllib", "parse"]
    for i, name in enumerate(layers):
        mods = {m for m in _imports(PKG / "config" / f"{name}.py", module_level=True) if m.startswith("apexrl")}
        allowed = {f"apexrl.config.{lower}" for lower in layers[:i]}
        assert mods <= allowed, f"config/{name}.py imports {mods - allowed}"
    from apexrl.agents import BUILDERS

    assert tuple(BUILDERS) == C.AGENTS


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


@pytest.mark.timeout(300)
def test_bench_runs_from_a_non_editable_install_outside_the_checkout(tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(PKG.parent)], check=True, capture_output=True, timeout=240)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = lambda *args: subprocess.run([sys.executable, "-m", "apexrl.cli", *args], cwd=work, env=env,
                                       capture_output=True, text=True, timeout=240)
    probe = subprocess.run([sys.executable, "-c", "import apexrl; print(apexrl.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True)
    assert probe.stdout.startswith(str(site)), probe.stdout  # the installed copy, not the checkout
    assert run("bench", "--help").returncode == 0
    res = run("bench", "update", "--updates", "5", "--repeats", "1")
    assert res.returncode == 0, res.stderr
    written = list((work / "bench-results").glob("update-*.json"))
    assert len(written) == 1 and '"commit"' in written[0].read_text()


def test_a_replay_shard_process_imports_neither_torch_nor_gymnasium():
    """Shard processes start beside the learner on small hosts: torch would cost them ~2-3 s of CPU and
    ~100 MB each at start-up, taken from the learner's first seconds."""
    code = "import sys, apexrl.runtime.shard_worker; print('torch' in sys.modules, 'gymnasium' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
