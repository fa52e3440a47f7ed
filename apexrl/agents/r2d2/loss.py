"""R2D2's learning signal on a batch of sequences (Kapturowski et al., 2019), shared by the learner and the
actors' initial priorities: burn-in from the stored state, n-step double-Q targets inside a sequence,
value rescaling, and a sequence's priority as a mix of the max and mean |TD|.

Torch only, no Ray; ``tests/agents/test_r2d2_loss.py`` checks each piece by hand on tiny cases.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def h(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Value rescaling h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x (Pohlen et al., 2018)."""
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def h_inv(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The inverse of :func:`h` (Pohlen et al., 2018, Proposition A.2)."""
    root = (torch.sqrt(1.0 + 4.0 * eps * (x.abs() + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return torch.sign(x) * (root.pow(2) - 1.0)


def priority_mix(td_abs: torch.Tensor, mask: torch.Tensor, eta: float) -> torch.Tensor:
    """[B] eta * max|TD| + (1 - eta) * mean|TD| over each sequence's ``mask``ed steps (R2D2, eq. in 2.3)."""
    m = mask.to(td_abs.dtype)
    count = m.sum(dim=1).clamp(min=1.0)
    return eta * (td_abs * m).amax(dim=1) + (1.0 - eta) * (td_abs * m).sum(dim=1) / count


def nstep_targets(reward: torch.Tensor, terminal: torch.Tensor, valid: torch.Tensor, boot: torch.Tensor,
                  start: int, n: int, gamma: float) -> torch.Tensor:
    """[B, L - start] n-step returns of steps ``start .. L-1``, bootstrapped with ``boot`` [B, L+1] (a value
    per observation position; position t+k is the observation after step t+k-1).

    A window stops early where the episode terminates (no bootstrap), where the sequence's valid steps end
    (bootstrap from the observation after the last one: a truncated episode's final observation, or the one
    after the sequence), or after n steps. Padding steps (``valid`` 0) get 0.
    """
    B, L = reward.shape
    dt = boot.dtype
    r = F.pad(reward.to(dt), (0, n + 1))
    term = F.pad(terminal.bool(), (0, n + 1))
    ok = F.pad(valid.bool(), (0, n + 1))
    t = torch.arange(start, L, device=reward.device)
    ret = torch.zeros(B, len(t), dtype=dt, device=reward.device)
    boot_w = torch.zeros_like(ret)
    boot_pos = t.expand(B, -1).clone()
    active = ok[:, t]
    disc = 1.0
    for i in range(n):
        idx = t + i
        step = active & ok[:, idx]
        ret = ret + disc * r[:, idx] * step
        ends = step & (term[:, idx] | ~ok[:, idx + 1] | (i == n - 1))
        w = torch.where(term[:, idx], torch.zeros((), dtype=dt, device=ret.device),
                        torch.full((), disc * gamma, dtype=dt, device=ret.device))
        boot_w = torch.where(ends, w, boot_w)
        boot_pos = torch.where(ends, (idx + 1).expand(B, -1), boot_pos)
        active = step & ~ends
        disc *= gamma
    value = boot.gather(1, boot_pos)
    return ret + torch.where(boot_w != 0, boot_w * value, torch.zeros_like(value))


@dataclass(frozen=True)
class SequenceSettings:
    burn_in: int
    n_step: int
    gamma: float
    use_h: bool
    h_eps: float
    zero_init_states: bool


def _begin(first: torch.Tensor) -> torch.Tensor:
    """Episode starts per observation position [B, L+1] (none at the successor position)."""
    return F.pad(first.bool(), (0, 1))


def burn_in_states(net: torch.nn.Module, obs: torch.Tensor, state: torch.Tensor, begin: torch.Tensor,
                   burn_in: int) -> torch.Tensor:
    """The recurrent state before position ``burn_in`` (what the actor had there), unrolled from the stored
    state without gradients; zero where an episode starts at ``burn_in``."""
    if burn_in == 0:
        return state
    with torch.no_grad():
        out = net(obs[:, :burn_in], state, begin[:, :burn_in])[1]
    return out.masked_fill(begin[:, burn_in].view(-1, 1), 0.0)


def sequence_td(online: torch.nn.Module, target: torch.nn.Module, batch: dict[str, torch.Tensor],
                s: SequenceSettings) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y [B, T], q_sa [B, T], mask [B, T]) over the trained positions ``burn_in ..``: double-Q n-step targets
    (online argmax, target value) and the online network's Q of the actions taken, in h-space when ``use_h``.
    ``q_sa`` keeps the online network's graph; targets carry none."""
    obs, action = batch["obs"], batch["action"].long()
    state = batch["state"]
    if s.zero_init_states:
        state = torch.zeros_like(state)
    begin = _begin(batch["first"])
    B0 = s.burn_in
    online_state = burn_in_states(online, obs, state, begin, B0)
    q_online, _ = online(obs[:, B0:], online_state, begin[:, B0:])  # [B, T+1, A], with gradients
    with torch.no_grad():
        target_state = online_state if target is online else burn_in_states(target, obs, state, begin, B0)
        q_target = q_online if target is online else target(obs[:, B0:], target_state, begin[:, B0:])[0]
        best = q_online.detach().argmax(dim=2, keepdim=True)
        value = q_target.gather(2, best).squeeze(2)  # [B, T+1]: value of each observation position B0..L
        if s.use_h:
            value = h_inv(value, s.h_eps)
        boot = F.pad(value, (B0, 0))  # index by absolute position
        y = nstep_targets(batch["reward"], batch["terminal"], batch["valid"], boot, B0, s.n_step, s.gamma)
        if s.use_h:
            y = h(y, s.h_eps)
    q_sa = q_online[:, :-1].gather(2, action[:, B0:].unsqueeze(2)).squeeze(2)
    mask = batch["valid"][:, B0:].bool()
    return y, q_sa, mask
