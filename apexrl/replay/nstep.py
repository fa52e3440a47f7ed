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
        self._t = 0  # ring position of the next write (shared by all envs: they step together)

    def reset(self) -> None:
        self._count[:] = 0

    def state_dict(self) -> dict:
        """The pending steps of unfinished windows: saved mid-episode, a copy goes on exactly."""
        return {"obs": None if self._obs is None else self._obs.copy(),
                "act": None if self._act is None else self._act.copy(),
                "rew": self._rew.copy(), "count": self._count.copy(), "t": self._t}

    def load_state_dict(self, state: dict) -> None:
        self._obs = None if state["obs"] is None else np.array(state["obs"])
        self._act = None if state["act"] is None else np.array(state["act"])
        self._rew, self._count, self._t = np.array(state["rew"]), np.array(state["count"]), int(state["t"])

    def step(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
             terminated: np.ndarray, truncated: np.ndarray) -> dict[str, np.ndarray] | None:
        """Record (obs, action, reward) of every env and return the completed transitions, or None.

        ``next_obs`` must be the true successor observation: the final observation for envs whose episode
        ended this step (not the reset observation an autoresetting vector env returns).
        """
        n = self.n
        if self._obs is None:
            self._obs = np.zeros((n, *obs.shape), dtype=obs.dtype)
        if self._act is None:
            action = np.asarray(action)
            self._act = np.zeros((n, *action.shape), dtype=action.dtype if action.dtype.kind == "f" else np.int64)
        p = self._t % n
        self._obs[p] = obs
        self._act[p] = action
        self._rew[p] = reward
        self._count += 1
        self._t += 1
        done = np.logical_or(terminated, truncated)
        parts: list[dict[str, np.ndarray]] = []

        full = (self._count >= n) & ~done
        if full.any():
            envs = np.flatnonzero(full)
            order = (p - n + 1 + np.arange(n)) % n  # oldest .. newest
            ret = self._powers[:n] @ self._rew[order][:, envs]
            parts.append({
                "obs": self._obs[order[0], envs],
                "action": self._act[order[0], envs],
                "reward": ret.astype(np.float32),
                "discount": np.full(len(envs), self._powers[n], dtype=np.float32),
                "next_obs": next_obs[envs],
            })
            self._count[envs] = n - 1

        for e in np.flatnonzero(done):  # episode ends are rare: a short loop over <= n windows
            c = int(self._count[e])
            starts = (p - c + 1 + np.arange(c)) % n
            lengths = c - np.arange(c)
            rets = np.empty(c, dtype=np.float64)
            for j in range(c):
                idx = (starts[j] + np.arange(lengths[j])) % n
                rets[j] = self._powers[: lengths[j]] @ self._rew[idx, e]
            disc = np.zeros(c) if terminated[e] else self._powers[lengths]
            parts.append({
                "obs": self._obs[starts, e],
                "action": self._act[starts, e],
                "reward": rets.astype(np.float32),
                "discount": disc.astype(np.float32),
                "next_obs": np.repeat(next_obs[e][None], c, axis=0),
            })
            self._count[e] = 0

        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}
