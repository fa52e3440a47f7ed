"""A role Ray cannot start is reported within seconds, and a run none of whose actors can start stops with
one line naming demand and supply."""

from types import SimpleNamespace

import pytest

from apexrl.config import Config
from apexrl.runtime.scheduling import StartWatch
from apexrl.runtime.supervisor import TrainingError


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _topology(ray, actor_resources):
    @ray.remote(num_cpus=0)
    class Role:
        pass

    actors = [Role.options(resources=r).remote() for r in actor_resources]
    return SimpleNamespace(learner=Role.remote(), shards=[Role.remote()], actors=actors,
                           num_actors=len(actors), cfg=Config())


def _poll_until_started(watch, clock, expect_waiting):
    import time

    for _ in range(100):  # the running roles answer within a few seconds of real time
        waiting = watch.poll()
        if len(watch.started) == 2 + len(watch.topology.actors) - len(expect_waiting):
            return waiting
        time.sleep(0.1)
    raise AssertionError(f"roles did not start: {watch.waiting}")


def test_an_actor_ray_cannot_place_is_reported_once_it_waited(ray_local):
    topology = _topology(ray_local, [{}, {"a-resource-no-node-has": 1}])
    clock, lines = Clock(), []
    watch = StartWatch(topology, lines.append, report_after_s=15, give_up_after_s=120, clock=clock)
    assert _poll_until_started(watch, clock, ["actor 1"]) == []  # not late yet: nothing said
    assert lines == []
    clock.t = 16.0
    assert watch.poll() == ["actor 1"]
    assert len(lines) == 1 and lines[0].startswith("waiting 16 s for Ray to start actor 1; the run asks for ")
    assert "CPU free" in lines[0] and "node(s) alive" in lines[0]
    clock.t = 20.0
    watch.poll()
    assert len(lines) == 1  # not repeated every poll
    clock.t = 500.0
    assert watch.poll() == ["actor 1"]  # one actor of two runs: reported, the run goes on
    assert len(lines) == 2


def test_a_run_none_of_whose_actors_can_start_stops_with_one_line(ray_local):
    topology = _topology(ray_local, [{"a-resource-no-node-has": 1}, {"a-resource-no-node-has": 1}])
    clock = Clock()
    watch = StartWatch(topology, lambda line: None, report_after_s=15, give_up_after_s=120, clock=clock)
    _poll_until_started(watch, clock, ["actor 0", "actor 1"])
    clock.t = 119.0
    assert watch.poll() == ["actor 0", "actor 1"]
    clock.t = 121.0
    with pytest.raises(TrainingError, match=r"^Ray has not started actor 0, actor 1 after 121 s; the run asks"):
        watch.poll()


def test_a_restarted_role_is_watched_from_its_own_start(ray_local):
    topology = _topology(ray_local, [{}])
    clock, lines = Clock(), []
    watch = StartWatch(topology, lines.append, report_after_s=15, give_up_after_s=120, clock=clock)
    _poll_until_started(watch, clock, [])
    clock.t = 1000.0
    topology.actors[0] = _topology(ray_local, [{"a-resource-no-node-has": 1}]).actors[0]  # a replacement
    assert watch.poll() == []  # waited 0 s so far
    clock.t = 1016.0
    assert watch.poll() == ["actor 0"] and len(lines) == 1
