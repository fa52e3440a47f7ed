"""bench update: every variant is timed, the first is the reference, and the JSON says so."""

from __future__ import annotations

import json

from apexrl.bench import update


def test_update_cost_is_reported_per_variant_relative_to_the_first(tmp_path, capsys):
    out = tmp_path / "update.json"
    assert update.main(["--variant", "network.torso=[16]", "--variant", "network.head=8",
                        "--updates", "5", "--repeats", "3", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["variant"] for r in rows] == ["network.torso=[16]", "network.head=8"]
    assert rows[0]["ratio"] == 1.0
    assert all(len(r["blocks_us"]) == 3 and r["us_per_update"] > 0 for r in rows)
    assert "us/update" in capsys.readouterr().out
