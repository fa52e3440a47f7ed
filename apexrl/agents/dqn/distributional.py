"""Return distributions for DQN: C51's categorical projection (Bellemare et al., 2017) and QR-DQN's quantile
Huber loss (Dabney et al., 2018), each in torch (the learner) and numpy (actors' initial priorities, which Ape-X
computes where the data is made, with torch or without it).

A head's raw output per action is one value (``expectation``: Q itself), the probabilities of ``num_atoms``
fixed returns between ``v_min`` and ``v_max`` (``categorical``), or ``num_atoms`` quantiles at the midpoints
(2i + 1) / 2N (``quantile``). Acting takes the mean; priorities come from the head's own loss, as Rainbow does
(the KL divergence from the projected target for C51; the quantile loss for QR-DQN).
"""

from __future__ import annotations

from typing import Any

import numpy as np

LOG_FLOOR = 1e-8  # probabilities below this count as this in a KL term's logarithms


def support(v_min: float, v_max: float, num_atoms: int) -> np.ndarray:
    return np.linspace(v_min, v_max, num_atoms, dtype=np.float32)


def quantile_midpoints(num_atoms: int) -> np.ndarray:
    return ((2 * np.arange(num_atoms) + 1) / (2.0 * num_atoms)).astype(np.float32)


def project_categorical(probs_next: Any, reward: Any, discount: Any, z: Any, xp: Any = np) -> Any:
    """The distribution of R + discount * Z' on the fixed support ``z`` [N]: each atom's mass split between
    its two neighbours on the support, values beyond it clipped to its ends. ``probs_next`` [B, N] is the
    target network's distribution for the chosen next action; a terminal window has discount 0, so all its
    mass lands on R. ``xp``: numpy or torch (the same arithmetic both ways)."""
    n = z.shape[0]
    v_min, v_max = float(z[0]), float(z[-1])
    dz = (v_max - v_min) / (n - 1)
    tz = reward[:, None] + discount[:, None] * z[None, :]
    b = ((tz.clip(v_min, v_max) if xp is np else tz.clamp(v_min, v_max)) - v_min) / dz  # [B, N], in [0, N-1]
    lo, hi = xp.floor(b), xp.ceil(b)
    w_hi = b - lo  # 0 where an atom lands exactly on a support point (lo == hi): all its mass stays there
    w_lo = 1.0 - w_hi
    out = xp.zeros_like(probs_next)
    rows = xp.arange(probs_next.shape[0])[:, None] * n
    lo_i, hi_i = (lo.astype(np.int64), hi.astype(np.int64)) if xp is np else (lo.long(), hi.long())
    flat = out.reshape(-1)
    if xp is np:
        np.add.at(flat, (rows + lo_i).reshape(-1), (probs_next * w_lo).reshape(-1))
        np.add.at(flat, (rows + hi_i).reshape(-1), (probs_next * w_hi).reshape(-1))
    else:
        flat.index_add_(0, (rows + lo_i).reshape(-1), (probs_next * w_lo).reshape(-1))
        flat.index_add_(0, (rows + hi_i).reshape(-1), (probs_next * w_hi).reshape(-1))
    return out


def quantile_huber(pred: Any, target: Any, taus: Any, kappa: float = 1.0, xp: Any = np) -> Any:
    """QR-DQN's loss per sample [B]: for every pair of a predicted quantile i [B, N] and a target sample j
    [B, N'], |tau_i - 1{u < 0}| * Huber_kappa(u) / kappa with u = target_j - pred_i, summed over i and
    averaged over j."""
    u = target[:, None, :] - pred[:, :, None]  # [B, N, N']
    a = xp.abs(u)
    huber = xp.where(a <= kappa, 0.5 * u * u, kappa * (a - 0.5 * kappa))
    below = (u < 0).astype(np.float32) if xp is np else (u < 0).to(u.dtype)
    weight = xp.abs(taus[None, :, None] - below)
    return (weight * huber / kappa).mean(**({"axis": 2} if xp is np else {"dim": 2})).sum(
        **({"axis": 1} if xp is np else {"dim": 1}))


class ValueHead:
    """What actors do with a head's raw outputs [B, A] or [B, A, N]: Q-values and initial priorities."""

    distributional = False
    atoms = 1

    def q(self, out: np.ndarray) -> np.ndarray:
        return out

    def priorities(self, out: np.ndarray, out_next: np.ndarray, action: np.ndarray, reward: np.ndarray,
                   discount: np.ndarray, eps: float, legal_next: np.ndarray | None = None) -> np.ndarray:
        """|R + discount * max_a Q(s', a) - Q(s, a)| + eps with the actor's own network (Ape-X)."""
        q_next = out_next if legal_next is None else np.where(legal_next, out_next, -np.inf)
        q_sa = np.take_along_axis(out, np.asarray(action, dtype=np.int64).reshape(-1, 1), axis=1)[:, 0]
        bootstrap = np.where(discount > 0, q_next.max(axis=1).astype(np.float64), 0.0)
        target = reward.astype(np.float64) + discount.astype(np.float64) * bootstrap
        return np.abs(target - q_sa) + eps

    def _chosen(self, out: np.ndarray, action: np.ndarray) -> np.ndarray:
        return out[np.arange(len(out)), np.asarray(action, dtype=np.int64)]

    def _best_next(self, out_next: np.ndarray, legal_next: np.ndarray | None) -> np.ndarray:
        q = self.q(out_next)
        if legal_next is not None:
            q = np.where(legal_next, q, -np.inf)
        return self._chosen(out_next, q.argmax(axis=1))


class CategoricalHead(ValueHead):
    distributional = True

    def __init__(self, v_min: float, v_max: float, num_atoms: int) -> None:
        self.z = support(v_min, v_max, num_atoms)
        self.atoms = num_atoms

    def q(self, out: np.ndarray) -> np.ndarray:
        return out @ self.z

    def priorities(self, out: np.ndarray, out_next: np.ndarray, action: np.ndarray, reward: np.ndarray,
                   discount: np.ndarray, eps: float, legal_next: np.ndarray | None = None) -> np.ndarray:
        target = project_categorical(self._best_next(out_next, legal_next).astype(np.float64),
                                     reward.astype(np.float64), discount.astype(np.float64), self.z.astype(np.float64))
        p = self._chosen(out, action).astype(np.float64)
        kl = (target * (np.log(np.maximum(target, LOG_FLOOR)) - np.log(np.maximum(p, LOG_FLOOR)))).sum(axis=1)
        return np.maximum(kl, 0.0) + eps


class QuantileHead(ValueHead):
    distributional = True

    def __init__(self, num_atoms: int) -> None:
        self.taus = quantile_midpoints(num_atoms).astype(np.float64)
        self.atoms = num_atoms

    def q(self, out: np.ndarray) -> np.ndarray:
        return out.mean(axis=-1)

    def priorities(self, out: np.ndarray, out_next: np.ndarray, action: np.ndarray, reward: np.ndarray,
                   discount: np.ndarray, eps: float, legal_next: np.ndarray | None = None) -> np.ndarray:
        target = (reward.astype(np.float64)[:, None]
                  + discount.astype(np.float64)[:, None] * self._best_next(out_next, legal_next))
        return quantile_huber(self._chosen(out, action).astype(np.float64), target, self.taus) + eps


def value_head(net: Any) -> ValueHead:
    """The numpy head for ``network.*`` settings (a ``NetworkConfig``)."""
    if net.distribution == "categorical":
        return CategoricalHead(net.v_min, net.v_max, net.num_atoms)
    if net.distribution == "quantile":
        return QuantileHead(net.num_atoms)
    return ValueHead()
