"""Sequence writer for recurrent agents (R2D2, Kapturowski et al., 2019): each env slot's stream of steps
cut into fixed-length, overlapping sequences that carry the actor's recurrent state at their first step.

A sequence has ``L = burn_in + seq_len`` steps and the observation after its last one:

    obs [L+1, ...]   action, reward, terminal, valid, first [L]   state [S] (before step 0)

Consecutive sequences of a slot share ``overlap`` steps (a new one starts every ``L - overlap`` steps), so
with ``overlap = burn_in`` every step trains in exactly one sequence (positions ``burn_in ..``) and serves
as burn-in of the next. Sequences never cross an episode boundary:

* an episode's first sequence starts with ``burn_in`` padding steps (``valid`` 0, state zero), so its
  first real step (``first`` 1) sits at the first trained position;
* at an episode end the pending steps go out padded on the right (``valid`` 0 after the last step); the
  observation after the last step is the true successor (a truncated episode's final observation), and
  ``terminal`` marks whether it may be bootstrapped from.

For a 7-step episode with burn_in 2, seq_len 2, overlap 2 (P = padding, * = trained positions):
``[P P s0* s1*] [s0 s1 s2* s3*] [s2 s3 s4* s5*] [s4 s5 s6* P]``.

Vectorized over env slots: one step writes one row per slot; only slots whose sequence completes are copied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_STEP_KEYS = ("action", "reward", "terminal", "valid", "first")


class SequenceWriter:
    """Feed one vectorized step at a time (as :class:`~apexrl.replay.nstep.NStepBuilder`), get back the
    sequences that became complete. ``state_source()`` gives the recurrent state [E, S] each slot's policy
    had before acting on ``obs`` of the step being written (None: no state is stored)."""

    def __init__(self, num_envs: int, burn_in: int, seq_len: int, overlap: int,
                 state_size: int = 0, state_source: Callable[[], np.ndarray] | None = None) -> None:
        L = burn_in + seq_len
        if seq_len < 1 or burn_in < 0 or not 0 <= overlap < L:
            raise ValueError(f"need seq_len >= 1, burn_in >= 0, 0 <= overlap < burn_in + seq_len; got "
                             f"{seq_len}, {burn_in}, {overlap}")
        self.num_envs, self.burn_in, self.length, self.overlap = num_envs, burn_in, L, overlap
        self.state_size, self._state_source = state_size, state_source
        self._obs: np.ndarray | None = None  # [E, L+1, ...]
        self._steps = {"action": np.zeros((num_envs, L), np.int64), "reward": np.zeros((num_envs, L), np.float32),
                       **{k: np.zeros((num_envs, L), np.uint8) for k in ("terminal", "valid", "first")}}
        self._state = np.zeros((num_envs, L, state_size), np.float32)  # the source's dtype from its first state
        self._pos = np.full(num_envs, burn_in, np.int64)  # where each slot's next step goes
        self._starting = np.ones(num_envs, bool)  # the next step is an episode's first

    def reset(self) -> None:
        self._clear(np.arange(self.num_envs), 0)
        self._pos[:] = self.burn_in
        self._starting[:] = True

    def _clear(self, slots: np.ndarray, start: int) -> None:
        for a in self._steps.values():
            a[slots, start:] = 0
        self._state[slots, start:] = 0
        if self._obs is not None:
            self._obs[slots, start:] = 0

    def step(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, next_obs: np.ndarray,
             terminated: np.ndarray, truncated: np.ndarray, slots: np.ndarray | None = None
             ) -> dict[str, np.ndarray] | None:
        """``next_obs`` is the true successor (final observations where an episode ended this step).
        ``slots``: the rows are these slots' steps (a turn-based game's agents that moved), else every slot's."""
        E = np.arange(self.num_envs) if slots is None else np.asarray(slots, dtype=np.int64)
        if self._obs is None:
            self._obs = np.zeros((self.num_envs, self.length + 1, *obs.shape[1:]), obs.dtype)
        p = self._pos[E]
        self._obs[E, p] = obs
        s = self._steps
        s["action"][E, p] = action
        s["reward"][E, p] = reward
        s["terminal"][E, p] = terminated
        s["valid"][E, p] = 1
        s["first"][E, p] = self._starting[E]
        if self._state_source is not None:
            state = np.asarray(self._state_source())
            if slots is not None and len(state) == self.num_envs:
                state = state[E]
            if state.dtype != self._state.dtype:
                self._state = self._state.astype(state.dtype)
            self._state[E, p] = state
        self._starting[E] = False
        self._pos[E] += 1
        done = np.logical_or(terminated, truncated)
        hit = np.flatnonzero(done | (self._pos[E] == self.length))  # rows of this step whose sequence is out
        if not len(hit):
            return None
        slots = E[hit]
        self._obs[slots, self._pos[slots]] = next_obs[hit]
        out = {"obs": self._obs[slots].copy(), **{k: a[slots].copy() for k, a in s.items()},
               "state": self._state[slots, 0].copy()}
        ended = slots[done[hit]]
        if len(ended):
            self._clear(ended, 0)
            self._pos[ended] = self.burn_in
            self._starting[ended] = True
        full = slots[~done[hit]]
        if len(full):
            k, L = self.overlap, self.length
            for a in (*s.values(), self._state):
                a[full, :k] = a[full, L - k:L]
            self._obs[full, :k] = self._obs[full, L - k:L]
            self._clear(full, k)
            self._pos[full] = k
        trains = out["valid"][:, self.burn_in:].any(axis=1)  # overlap < burn_in can leave none to train
        if not trains.all():
            out = {key: v[trains] for key, v in out.items()}
        return out if len(out["valid"]) else None

    def state_dict(self) -> dict[str, Any]:
        """The slots' unfinished sequences: a copy loaded from it emits what this one would have."""
        return {"obs": None if self._obs is None else self._obs.copy(),
                "steps": {k: a.copy() for k, a in self._steps.items()}, "state": self._state.copy(),
                "pos": self._pos.copy(), "starting": self._starting.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._obs = None if state["obs"] is None else np.array(state["obs"])
        self._steps = {k: np.array(a) for k, a in state["steps"].items()}
        self._state, self._pos = np.array(state["state"]), np.array(state["pos"])
        self._starting = np.array(state["starting"])
