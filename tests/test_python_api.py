"""The Python API trains a user's own torch module (the README's example)."""

import importlib.util
from pathlib import Path

import pytest
import torch

from apexrl import checkpoint as ckpt

pytestmark = pytest.mark.timeout(300)


def test_custom_model_example_trains_and_checkpoints_the_users_module(tmp_path):
    path = Path(__file__).resolve().parent.parent / "examples" / "custom_model.py"
    spec = importlib.util.spec_from_file_location("custom_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    result = mod.main(max_env_steps=2_000, run_dir=str(tmp_path / "run"))
    assert result.env_steps >= 2_000
    _, state = ckpt.load_latest(tmp_path / "run")
    assert set(state["learner"]["net"]) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "out.weight", "out.bias"}
    assert isinstance(state["learner"]["net"]["fc1.weight"], torch.Tensor)
