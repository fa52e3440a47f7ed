"""apexrl.optim.Adam is torch.optim.Adam's update, without importing torch's compiler."""

import subprocess
import sys

import pytest
import torch

from apexrl.optim import Adam


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))


def _train(net: torch.nn.Module, opt, steps: int, seed: int = 1) -> None:
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(16, 4, generator=g)
        for p in net.parameters():
            p.grad = None
        net(x).pow(2).mean().backward()
        opt.step()


@pytest.mark.parametrize("fused", [True, False])
def test_matches_torch_adam_step_for_step(fused):
    ours, ref = _net(0), _net(0)
    opt = Adam(ours.parameters(), lr=2e-3, eps=1e-8)
    opt._fused = fused and opt._fused
    _train(ours, opt, 50)
    _train(ref, torch.optim.Adam(ref.parameters(), lr=2e-3, eps=1e-8), 50)
    for a, b in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_state_dict_round_trip_continues_identically():
    a, b = _net(0), _net(0)
    opt_a = Adam(a.parameters(), lr=1e-3)
    _train(a, opt_a, 10)
    b.load_state_dict(a.state_dict())
    opt_b = Adam(b.parameters(), lr=1e-3)
    opt_b.load_state_dict(opt_a.state_dict())
    _train(a, opt_a, 5, seed=7)
    _train(b, opt_b, 5, seed=7)
    for x, y in zip(a.parameters(), b.parameters()):
        assert torch.equal(x, y)


def test_a_state_for_another_network_is_refused():
    opt = Adam(_net(0).parameters(), lr=1e-3)
    other = Adam(torch.nn.Linear(3, 3).parameters(), lr=1e-3)
    with pytest.raises(ValueError, match="does not fit|not an apexrl Adam"):
        opt.load_state_dict(other.state_dict())


def test_building_and_stepping_a_learner_does_not_import_torch_dynamo():
    code = (
        "import sys, numpy as np\n"
        "from apexrl.config import load\n"
        "from apexrl.runtime.assembly import assemble\n"
        "L = assemble(load('cartpole', [])).make_learner()\n"
        "B = 8\n"
        "b = dict(obs=np.zeros((B, 4), np.float32), next_obs=np.zeros((B, 4), np.float32),\n"
        "         action=np.zeros(B, np.int64), reward=np.ones(B, np.float32), discount=np.ones(B, np.float32))\n"
        "L.update(b, np.ones(B, np.float32))\n"
        "L.load_state_dict(L.state_dict())\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
