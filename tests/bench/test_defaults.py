"""``apexrl bench defaults``: the plain run on each task against its preset, medians with unsolved seeds
counted as never."""

from __future__ import annotations

from apexrl.bench.defaults import CASES, _median_time, print_table


def test_an_unsolved_seed_counts_as_never_in_the_median():
    assert _median_time([{"time_to_target_s": 10.0}, {"time_to_target_s": None}, {"time_to_target_s": 30.0}]) == 30.0
    assert _median_time([{"time_to_target_s": 10.0}, {"time_to_target_s": None}, {"time_to_target_s": None}]) is None


def test_the_table_gives_solved_seeds_and_the_ratio_to_the_preset(capsys):
    res = {"pendulum": {"agent": "dpg", "target": -200.0,
                        "defaults": {"runs": [{}, {}], "solved": 2, "median_time_s": 30.0},
                        "preset": {"runs": [{}, {}], "solved": 2, "median_time_s": 15.0}}}
    print_table(res, {"lunarlander": "needs Box2D (its extra is not installed)"})
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("pendulum"))
    assert row.split()[-4:] == ["2/2", "30.0", "15.0", "2.00"]
    assert "lunarlander" in out and "needs Box2D" in out


def test_every_task_with_a_preset_names_one_that_ships():
    from apexrl.config import load

    for case in CASES.values():
        if case.preset is not None:
            load(case.preset, [])
