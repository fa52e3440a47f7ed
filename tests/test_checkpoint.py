"""Checkpoints: atomic writes, the newest complete one wins, damaged ones are skipped, old ones pruned."""

import pytest
import torch

from apexrl import checkpoint as ckpt


def state(step):
    return {"learner": {"net": {"w": torch.full((2,), float(step))}}, "config": {}, "counters": {"env_steps": step}}


def test_newest_complete_checkpoint_is_loaded(tmp_path):
    for step in (100, 200, 300):
        ckpt.save(tmp_path, state(step), step, keep=5)
    path, s = ckpt.load_latest(tmp_path)
    assert path.name == "ckpt-0000000300.pt" and s["counters"]["env_steps"] == 300


def test_a_truncated_newest_checkpoint_falls_back_to_the_previous_one(tmp_path):
    ckpt.save(tmp_path, state(100), 100)
    newest = ckpt.save(tmp_path, state(200), 200)
    newest.write_bytes(newest.read_bytes()[:50])  # the machine died mid-write of a non-atomic writer
    path, s = ckpt.load_latest(tmp_path)
    assert s["counters"]["env_steps"] == 100 and path.name == "ckpt-0000000100.pt"


def test_leftover_temporary_files_are_ignored(tmp_path):
    ckpt.save(tmp_path, state(100), 100)
    (ckpt.checkpoint_dir(tmp_path) / ".ckpt-0000000200.pt.tmp-123").write_bytes(b"partial")
    path, _ = ckpt.load_latest(tmp_path)
    assert path.name == "ckpt-0000000100.pt"


def test_only_the_newest_keep_are_kept(tmp_path):
    for step in range(1, 6):
        ckpt.save(tmp_path, state(step), step, keep=2)
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["ckpt-0000000004.pt", "ckpt-0000000005.pt"]


def test_missing_run_dir_and_empty_run_dir_are_clear_errors(tmp_path):
    with pytest.raises(ckpt.CheckpointError, match="does not exist"):
        ckpt.load_latest(tmp_path / "nope")
    with pytest.raises(ckpt.CheckpointError, match="has no checkpoints"):
        ckpt.load_latest(tmp_path)


class _RunsCode:
    """What a malicious checkpoint carries: unpickling it would call os.system."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_that_would_run_code_is_refused_and_nothing_runs(tmp_path):
    import torch

    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"learner": {"net": {}}, "config": {}, "payload": _RunsCode(marker)}, path)
    with pytest.raises(ckpt.CheckpointError) as e:
        ckpt.load_file(path)
    assert "could run code" in str(e.value) and "system" in str(e.value)
    assert not marker.exists()


def test_tensors_arrays_and_plain_values_load(tmp_path):
    import numpy as np
    import torch

    state = {"learner": {"w": torch.ones(2)}, "config": {"seed": 1},
             "replay": [{"obs": np.arange(6, dtype=np.uint8).reshape(2, 3), "prio": np.ones(2), "n": 2}],
             "rng": np.random.default_rng(0).bit_generator.state}
    path = tmp_path / "ok.pt"
    torch.save(state, path)
    got = ckpt.load_file(path)
    np.testing.assert_array_equal(got["replay"][0]["obs"], state["replay"][0]["obs"])
    assert got["replay"][0]["obs"].dtype == np.uint8 and got["rng"] == state["rng"]
