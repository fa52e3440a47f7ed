"""The run's TensorBoard files, written without torch, read back by TensorBoard's own reader."""

from __future__ import annotations

import subprocess
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from apexrl.metrics import MetricsWriter


def _read(logdir):
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_scalars_and_the_hyperparameter_table_are_what_tensorboard_shows(tmp_path):
    w = MetricsWriter(tmp_path)
    w.hparams({"learner.lr": 0.001, "seed": 3})
    w.write({"train_return_mean": 12.5, "loss": 0.25, "actor0_env_steps_per_s": 900, "note": "x", "done": True}, 100)
    w.write({"train_return_mean": 20.0, "loss": float("nan")}, 200)
    w.close()
    acc = _read(tmp_path / "tb")
    assert [(e.step, e.value) for e in acc.Scalars("charts/train_return_mean")] == [(100, 12.5), (200, 20.0)]
    assert [(e.step, e.value) for e in acc.Scalars("losses/td_loss")] == [(100, 0.25)]  # NaN is left out
    assert [e.value for e in acc.Scalars("actors/actor0_env_steps_per_s")] == [900]
    assert "done" not in str(acc.Tags()["scalars"])  # a bool is not a curve
    [text] = acc.Tensors("hyperparameters/text_summary")
    assert b"|learner.lr|0.001|" in text.tensor_proto.string_val[0]
    assert acc.SummaryMetadata("hyperparameters/text_summary").plugin_data.plugin_name == "text"


def test_each_policys_learner_metrics_are_curves_beside_the_runs(tmp_path):
    w = MetricsWriter(tmp_path)
    w.write({"loss": 0.5, "loss/p0": 0.25, "td_abs_mean/p0": 0.75, "actor_loss/p1": 1.5}, 100)
    w.close()
    acc = _read(tmp_path / "tb")
    assert [e.value for e in acc.Scalars("losses/td_loss/p0")] == [0.25]
    assert [e.value for e in acc.Scalars("losses/td_abs_mean/p0")] == [0.75]
    assert [e.value for e in acc.Scalars("losses/actor_loss/p1")] == [1.5]


def test_a_resumed_run_hides_the_curve_past_its_checkpoint(tmp_path):
    first = MetricsWriter(tmp_path)
    for step in (100, 200, 300):
        first.write({"loss": step / 1000}, step)
    first.close()
    resumed = MetricsWriter(tmp_path, purge_step=200)  # the checkpoint was at 200 steps
    resumed.write({"loss": 0.9}, 250)
    resumed.close()
    assert [(e.step, round(e.value, 3)) for e in _read(tmp_path / "tb").Scalars("losses/td_loss")] == [
        (100, 0.1), (250, 0.9)]


def test_writing_tensorboard_files_does_not_load_torch(tmp_path):
    code = ("import sys; from pathlib import Path; from apexrl.metrics import MetricsWriter; "
            f"w = MetricsWriter(Path({str(tmp_path)!r})); w.write({{'loss': 1.0}}, 1); w.close(); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def test_tensorboard_is_loaded_at_the_first_scalar_and_text_written_before_it_is_kept(tmp_path):
    code = ("import sys; from pathlib import Path; from apexrl.metrics import MetricsWriter; "
            f"w = MetricsWriter(Path({str(tmp_path)!r})); w.hparams({{'seed': 3}}); "
            "print('tensorboard' in sys.modules); w.write({'loss': 1.0}, 1); print('tensorboard' in sys.modules); "
            "w.close()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]
    acc = _read(tmp_path / "tb")
    assert [e.value for e in acc.Scalars("losses/td_loss")] == [1.0]
    [text] = acc.Tensors("hyperparameters/text_summary")
    assert b"|seed|3|" in text.tensor_proto.string_val[0]


def test_a_run_that_reports_nothing_still_leaves_its_hyperparameters(tmp_path):
    w = MetricsWriter(tmp_path)
    w.hparams({"seed": 3})
    w.close()
    [text] = _read(tmp_path / "tb").Tensors("hyperparameters/text_summary")
    assert b"|seed|3|" in text.tensor_proto.string_val[0]
