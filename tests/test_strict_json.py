"""Everything apexrl writes as JSON parses with a strict parser: null, never NaN or Infinity."""

from __future__ import annotations

import json

import numpy as np
import pytest

from apexrl import strict_json
from apexrl.metrics import MetricsWriter


def strict_loads(text: str):
    def refuse(token: str):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_become_null_and_numpy_values_plain():
    record = {"a": float("nan"), "b": float("inf"), "c": -float("inf"), "d": np.float32("nan"),
              "e": np.float64(1.5), "f": np.int64(3), "g": [1.0, float("nan")], "h": np.array([np.inf, 2.0]),
              "i": {"j": np.float32(0.25)}, "k": np.bool_(True), "l": "NaN"}
    assert strict_loads(strict_json.dumps(record)) == {
        "a": None, "b": None, "c": None, "d": None, "e": 1.5, "f": 3, "g": [1.0, None], "h": [None, 2.0],
        "i": {"j": 0.25}, "k": True, "l": "NaN"}


def test_plain_json_would_have_written_tokens_a_strict_parser_rejects():
    with pytest.raises(ValueError, match="NaN"):
        strict_loads(json.dumps({"x": float("nan")}))


def test_metrics_jsonl_is_strict_json(tmp_path):
    w = MetricsWriter(tmp_path, tensorboard=False)
    w.write({"env_steps": 10, "train_return_mean": float("nan"), "loss": np.float32("inf")}, step=10)
    w.write({"env_steps": 20, "train_return_mean": 1.0}, step=20)
    w.close()
    rows = [strict_loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [{"env_steps": 10, "train_return_mean": None, "loss": None},
                    {"env_steps": 20, "train_return_mean": 1.0}]


def test_benchmark_results_are_strict_json(tmp_path):
    from apexrl.bench._results import write_result

    path = write_result("t", {"rate": float("nan"), "rows": [{"x": np.float64("inf")}]}, tmp_path / "r.json")
    data = strict_loads(path.read_text())
    assert data["rate"] is None and data["rows"] == [{"x": None}] and "commit" in data
