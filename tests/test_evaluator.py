"""Periodic evaluation runs on a thread of the driver and plays the newest weights the learner published."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.agents import get_builder
from apexrl.config import Config
from apexrl.core import state_dict_to_numpy
from apexrl.runtime.assembly import System

OBS, ACT = gym.spaces.Box(-5, 5, (4,)), gym.spaces.Discrete(2)


def _system(model_factory=None) -> System:
    cfg = Config().replace(**{"network.torso": [16], "network.head": 16, "evaluation.episodes": 3})
    return System(cfg, get_builder("dqn"), OBS, ACT, 1, model_factory)


def test_it_plays_the_newest_publication_and_reports_its_version(ray_local):
    ray = ray_local
    from apexrl.runtime.evaluator import DriverEvaluator
    from apexrl.runtime.transport import ParameterServer

    system = _system()
    ps = ParameterServer.remote()
    ev = DriverEvaluator(system, ps)
    assert ev.submit().result(timeout=60) == {"eval_returns": [], "weights_version": -1}  # nothing published

    net = system.make_network()
    with torch.no_grad():
        for p in net.parameters():
            p.fill_(0.5)
    ray.get(ps.set.remote(7, [ray.put(state_dict_to_numpy(net))]))
    res = ev.submit().result(timeout=60)
    assert res["weights_version"] == 7 and len(res["eval_returns"]) == 3
    played = ev.net.state_dict()  # CartPole's MLP: the evaluation acts in numpy with the published weights
    assert all(np.array_equal(played[k], v) for k, v in state_dict_to_numpy(net).items())


def test_a_failing_evaluation_reaches_the_driver_through_the_future(ray_local):
    ray = ray_local
    from apexrl.runtime.evaluator import DriverEvaluator
    from apexrl.runtime.transport import ParameterServer

    class Broken(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("broken network")

    ps = ParameterServer.remote()
    ray.get(ps.set.remote(0, [ray.put({"w": torch.zeros(1).numpy()})]))
    fut = DriverEvaluator(_system(lambda o, a: Broken()), ps).submit()
    with pytest.raises(RuntimeError, match="broken network"):
        fut.result(timeout=60)


def test_evaluation_uses_one_torch_thread_without_changing_the_callers(ray_local):
    ray = ray_local
    from apexrl.runtime.evaluator import DriverEvaluator
    from apexrl.runtime.transport import ParameterServer

    seen: list[int] = []

    class Probe(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(torch.get_num_threads())
            return torch.zeros(len(x), 2)

    torch.set_num_threads(2)
    ps = ParameterServer.remote()
    ray.get(ps.set.remote(0, [ray.put({"w": torch.zeros(1).numpy()})]))
    ev = DriverEvaluator(_system(lambda o, a: Probe()), ps)
    ev.submit().result(timeout=60)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == 2  # restored before the result is handed over


def test_an_evaluation_in_numpy_runs_on_one_blas_thread_and_restores_the_callers():
    """numpy's OpenBLAS spins a thread per core after each small product; the driver's evaluation of an MLP
    in numpy keeps it to one while it runs, and leaves a user's process as it was."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from apexrl.runtime.evaluator import _one_thread

    def blas_threads() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    if not blas_threads():
        pytest.skip("numpy here has no BLAS library threadpoolctl can see")
    with threadpool_limits(2, user_api="blas"):
        with _one_thread():
            assert blas_threads() == {1}
        assert blas_threads() == {2}


def test_a_worker_evaluator_whose_worker_died_reports_that_evaluation_failed_and_plays_the_next_on_a_new_one(
        ray_local):
    ray = ray_local
    from ray.exceptions import RayActorError

    from apexrl.runtime.evaluator import WorkerEvaluator
    from apexrl.runtime.transport import ParameterServer

    system = _system()
    ps = ParameterServer.remote()
    ray.get(ps.set.remote(3, [ray.put(state_dict_to_numpy(system.make_network()))]))
    ev = WorkerEvaluator(system, ps)
    first = ev.worker
    ray.kill(first)  # its node went
    with pytest.raises(RayActorError):
        ev.submit().result(timeout=60)
    res = ev.submit().result(timeout=120)
    assert ev.worker is not first and res["weights_version"] == 3 and len(res["eval_returns"]) == 3
    ev.kill()
