"""Periodic evaluation runs on a thread of the driver and plays the newest weights the learner published."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from apexrl.config import Config
from apexrl.networks import make_network_factory, state_dict_to_numpy

OBS, ACT = gym.spaces.Box(-5, 5, (4,)), gym.spaces.Discrete(2)


def _cfg() -> Config:
    return Config().replace(**{"network.hidden_sizes": [16, 16], "evaluation.episodes": 3})


def test_it_plays_the_newest_publication_and_reports_its_version(ray_local):
    ray = ray_local
    from apexrl.runtime.evaluator import DriverEvaluator
    from apexrl.runtime.transport import ParameterServer

    cfg = _cfg()
    ps = ParameterServer.remote()
    ev = DriverEvaluator(cfg, OBS, ACT, ps, None)
    assert ev.submit().result(timeout=60) == {"eval_returns": [], "weights_version": -1}  # nothing published

    net = make_network_factory(cfg.network)(OBS, ACT)
    with torch.no_grad():
        for p in net.parameters():
            p.fill_(0.5)
    ray.get(ps.set.remote(7, [ray.put(state_dict_to_numpy(net))]))
    res = ev.submit().result(timeout=60)
    assert res["weights_version"] == 7 and len(res["eval_returns"]) == 3
    assert all(torch.equal(a, b) for a, b in zip(ev.net.parameters(), net.parameters()))


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
    fut = DriverEvaluator(_cfg(), OBS, ACT, ps, lambda o, a: Broken()).submit()
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
    ev = DriverEvaluator(_cfg(), OBS, ACT, ps, lambda o, a: Probe())
    ev.submit().result(timeout=60)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == 2  # restored before the result is handed over
