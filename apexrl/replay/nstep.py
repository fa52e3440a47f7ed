"""n-step transition builder for a batch of environments stepped together (actor side).

For a window starting at time t of length m <= n that ends at t+m:
    R_t      = sum_{k<m} gamma^k r_{t+k}
    discount = gamma^m   if the episode continues or was truncated at t+m (bootstrap from next_obs)
             = 0         if the episode terminated at t+m (no bootstrap)
so the learner's target is simply  R_t + discount * Q_target(next_obs, argmax_a Q(next_obs, a)).

Termination and truncation differ only in ``discount``: a time limit is not a terminal state of the MDP
(Pardo et al., 2018), so a truncated window still bootstraps from the final observation. At an episode
end every pending window (lengths m = 1 .. count) is flushed, so no step is lost and no window crosses
an episode boundary.

Each env slot keeps its own place in the ring, so a step may cover only some slots (``slots``): in a
turn-based multi-agent game a slot is one agent of one game copy, and its transition completes only when
that agent is next to move.
"""

from __future__ import annotations

import numpy as np


class NStepBuilder:
    """Feed one vectorized step at a time, get back the transitions that became complete.

    ``obs`` arrays may be anything with a leading env dimension: float observations, or frame-id stacks
    for Atari (the replay de-duplicates frames); actions are discrete ids (stored int64) or continuous
    vectors (their float dtype kept).
    """

    def __init__(self, num_envs: int, n: int, gamma: float) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.num_envs, self.n, self.gamma = num_envs, n, gamma
        self._powers = gamma ** np.arange(n + 1, dtype=np.float64)
        self._obs: np.ndarray | None = None  # [n, E, ...] ring over time
        self._act: np.ndarray | None = None  # [n, E, ...]: discrete ids or continuous action vectors
        self._rew = np.zeros((n, num_envs), dtype=np.float64)
        self._count = np.zeros(num_envs, dtype=np.int64)  # pending steps per env, <= n
        self._t = np.zeros(num_envs, dtype=np.int64)  # ring position of each env's next write
        self._all = np.arange(num_envs)

    def reset(self) -> None:
        self._count[:] = 0

    def state_dict(self) -> dict:
        """The pending steps of unfinished windows: saved mid-episode, a copy goes on exactly."""
        return {"obs": None if self._obs is None else self._obs.copy(),
                "act": None if self._act is None else self._act.copy(),
                "rew": self._rew.copy(), "count": self._count.copy(), "t": self._t.copy()}

    def load_state_dict(self, state: dict) -> None:
        self._obs = None if state["obs"] is None else np.array(state["obs"])
        self._act = None if state["act"] is None else np.array(state["act"])
        self._rew, self._count = np.array(state["rew"]), np.array(state["count"])
        # a scalar: saved when all envs shared one ring position
        self._t = np.broadcast_to(np.asarray(state["t"], dtype=np.int64), (self.num_envs,)).copy()

    def step(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
             terminated: np.ndarray, truncated: np.ndarray,
             slots: np.ndarray | None = None) -> dict[str, np.ndarray] | None:
        """Record (obs, action, reward) of every env, or of the env ``slots`` the arrays' rows stand for, and
        return the transitions that became complete, or None.

        ``next_obs`` must be the true successor observation: the final observation for envs whose episode
        ended this step (not the reset observation an autoresetting vector env returns).
        """
        n = self.n
        if self._obs is None:
            self._obs = np.zeros((n, self.num_envs, *obs.shape[1:]), dtype=obs.dtype)
        if self._act is None:
            action = np.asarray(action)
            dtype = action.dtype if action.dtype.kind == "f" else np.int64
            self._act = np.zeros((n, self.num_envs, *action.shape[1:]), dtype=dtype)
        # all envs at once: one ring position (plain slicing, the single-agent hot path); else one per slot
        sel: slice | np.ndarray
        if slots is None:
            idx, sel, p = self._all, slice(None), self._t[0] % n
        else:
            idx = sel = np.asarray(slots, dtype=np.int64)
            p = self._t[idx] % n
        self._obs[p, sel] = obs
        self._act[p, sel] = action
        self._rew[p, sel] = reward
        self._count[sel] += 1
        self._t[sel] += 1
        done = np.logical_or(terminated, truncated)
        parts: list[dict[str, np.ndarray]] = []

        full = np.flatnonzero((self._count[sel] >= n) & ~done)
        if len(full):
            envs = idx[full]
            pf = p if slots is None else p[full]
            order = (pf + 1 + np.arange(n)[:, None]) % n  # [n, 1 or envs]: oldest .. newest
            ret = (self._powers[:n, None] * self._rew[order, envs]).sum(axis=0)
            parts.append({
                "obs": self._obs[order[0], envs],
                "action": self._act[order[0], envs],
                "reward": ret.astype(np.float32),
                "discount": np.full(len(envs), self._powers[n], dtype=np.float32),
                "next_obs": next_obs[full],
            })
            self._count[envs] = n - 1

        for j in np.flatnonzero(done):  # episode ends are rare: a short loop over <= n windows
            e, pe = idx[j], p if slots is None else p[j]
            c = int(self._count[e])
            starts = (pe - c + 1 + np.arange(c)) % n
            lengths = c - np.arange(c)
            rets = np.empty(c, dtype=np.float64)
            for i in range(c):
                ring = (starts[i] + np.arange(lengths[i])) % n
                rets[i] = self._powers[: lengths[i]] @ self._rew[ring, e]
            disc = np.zeros(c) if terminated[j] else self._powers[lengths]
            parts.append({
                "obs": self._obs[starts, e],
                "action": self._act[starts, e],
                "reward": rets.astype(np.float32),
                "discount": disc.astype(np.float32),
                "next_obs": np.repeat(next_obs[j][None], c, axis=0),
            })
            self._count[e] = 0

        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}
